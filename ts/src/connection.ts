/**
 * A session with a replica server over WebTransport or WebSocket
 * (docs/protocol.md §10): the handshake, ticks applied to a {@link Replica}
 * as they arrive, keep-alive, resync, server RPCs, and reconnection.
 *
 * Uses the browser WebTransport and WebSocket APIs: the globals where there
 * are some (browsers; Node ≥ 22 has WebSocket, no Node has WebTransport),
 * else constructors passed as `WebTransport` and `WebSocket` (for example
 * the `ws` package's in Node 20). By default a connection uses WebTransport
 * when it is given a URL for it and the runtime has it, and falls back to
 * WebSocket when WebTransport fails to connect.
 */

import { ReplicaDecodeError } from "./errors.js";
import { encodeUTF8 } from "./bits.js";
import {
  ChannelError,
  openWebSocket,
  openWebTransport,
  type Channel,
  type WebSocketConstructor,
  type WebTransportConstructor,
} from "./transport.js";
import { decodeDescriptor } from "./descriptor.js";
import type { Limits } from "./decoder.js";
import { Replica } from "./replica.js";
import { encodeRecord } from "./encoder.js";
import type { Schema, StructType } from "./schema.js";
import { equal, type Entity, type Rec } from "./state.js";
import { MAX_RESUME, PROTOCOL_VERSION, encodeHello, encodePing, encodePong, encodeRPC, parseMessage, parseRPC, type Resume, type Ticket, type Tick, type Welcome } from "./session.js";
import { CloseCode as C, MsgType } from "./enums.js";

/** Close codes (§10.1); on WebSocket the status is 4000 + code. */
export const CloseCode = {
  Normal: C.Normal,
  GoingAway: C.GoingAway,
  ProtocolError: C.ProtocolError,
  MessageTooLarge: C.MessageTooLarge,
  SlowConsumer: C.SlowConsumer,
  IdleTimeout: C.IdleTimeout,
  HandshakeTimeout: C.HandshakeTimeout,
  AuthFailed: C.AuthFailed,
  Incompatible: C.Incompatible,
  PolicyViolation: C.PolicyViolation,
  Internal: C.Internal,
  Network: C.Network,
  ServerBusy: C.ServerBusy,
  Replaced: C.Replaced,
  Duplicate: C.Duplicate,
} as const satisfies { readonly [N in keyof typeof C]: C };
export type CloseCode = C;


/**
 * Which transport a connection uses: "auto" tries WebTransport first when
 * there is a webTransportUrl and a WebTransport constructor, and WebSocket
 * when it fails to connect (or is not there); the others force one.
 */
export type TransportMode = "auto" | "webtransport" | "websocket";

export interface ConnectOptions {
  /** The server's WebSocket URL (ws:// or wss://). */
  url?: string;
  /** The server's WebTransport URL (https://host:port/replica). */
  webTransportUrl?: string;
  /**
   * SHA-256 hashes of the server's certificate, for a self-signed
   * development certificate (WebTransport's serverCertificateHashes), or a
   * function that fetches them, called before every WebTransport connect
   * (the server rotates its certificate).
   */
  certificateHashes?: Uint8Array[] | (() => Promise<Uint8Array[]>);
  /** The transport; default "auto". */
  transport?: TransportMode;
  /**
   * The client's own schema, decoded from its descriptor (a generated
   * module's `schema`, or decodeDescriptor's): the descriptor goes in the
   * HELLO.
   */
  schema: Schema;
  /** The connect token the server's authenticator checks. */
  token?: Uint8Array | string;
  /** Gives reconnect a fresh token; without it the same token is sent again. */
  refresh?: () => Promise<Uint8Array | string>;
  /** Decoder limits, sent in the HELLO (§10.2). */
  limits?: Partial<Limits>;
  /** A WebSocket constructor, when there is no global one. */
  WebSocket?: WebSocketConstructor;
  /** A WebTransport constructor, when there is no global one. */
  WebTransport?: WebTransportConstructor;
  /** The longest message accepted over WebTransport; default the larger of 1 MiB and limits.MaxSegmentBytes. */
  maxMessageBytes?: number;
  /** Bounds the handshake; default 5000 ms. */
  handshakeTimeoutMs?: number;
  /** Closes with code 5 when nothing arrives for this long, and pings every third of it; default 15000 ms. */
  idleTimeoutMs?: number;
}

/** The server declined the session (REFUSE, or a close during the handshake). */
export class RefusedError extends Error {
  override readonly name = "RefusedError";
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(`server refused the session: code ${code}: ${reason}`);
  }
}

/** The connection closed; code is the §10.1 close code when the peer sent one. */
export class ClosedError extends Error {
  override readonly name = "ClosedError";
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(`connection closed: code ${code}: ${reason}`);
  }
}

function toBytes(data: unknown): Uint8Array | undefined {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return undefined;
}

const tokenBytes = (t: Uint8Array | string | undefined): Uint8Array =>
  t === undefined ? new Uint8Array(0) : typeof t === "string" ? encodeUTF8(t) : t;

interface Session {
  ch: Channel;
  welcome: Welcome;
  /** Messages and a close that arrived after the WELCOME, before the session started. */
  early: unknown[];
  earlyClose?: { code: number; reason: string };
}

const NO_TICKET: Ticket = [0n, 0n];

/** What reconnect asks the server to resume, and the descriptor the replica was decoded with. */
interface ResumeRequest {
  block: Resume;
  descriptor: Uint8Array;
}

/** A session with a replica server. */
export class Connection {
  private ch!: Channel;
  private welcomeMsg!: Welcome;
  /** The ticket reconnect offers the server (§10.5): the last WELCOME's, or none after a rejected tick. */
  private ticket: Ticket = NO_TICKET;
  /** A tick of this session's state was applied: the replica can resume. */
  private applied = false;
  private pending: Tick | null = null;
  private segs: Uint8Array[] = [];
  private resync = false;
  private nonce = 0n;
  private pingTimer: ReturnType<typeof setInterval> | undefined;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private handlers = new Map<string, ((e: Entity, args: Rec) => void)[]>();
  private closed: ClosedError | undefined;
  private closeWaiters: ((e: ClosedError) => void)[] = [];
  /**
   * The number of the last tick applied (0n before the first). A resumed
   * session (§10.5) keeps it until its catch-up tick applies.
   */
  lastTick = 0n;
  /** Called after each applied tick. */
  onTick: ((tick: bigint) => void) | undefined;
  /** Called when a tick is rejected (the connection then closes with code 2) or a message is malformed. */
  onError: ((err: Error) => void) | undefined;
  /** Called once when the connection closes. */
  onClose: ((err: ClosedError) => void) | undefined;
  /** Message bytes received since the connection was made, handshakes included. */
  bytesReceived = 0;
  /** Milliseconds the last tick took to decode and apply, callbacks included. */
  lastApplyMs = 0;

  private constructor(
    private readonly opts: ConnectOptions,
    readonly replica: Replica,
  ) {}

  /** Connects, performs the handshake (§10.3) and starts receiving ticks. */
  static async connect(opts: ConnectOptions): Promise<Connection> {
    const s = await handshake(opts, tokenBytes(opts.token));
    const remote = decodeDescriptor(s.welcome.descriptor);
    let rep: Replica;
    try {
      rep = new Replica(opts.schema, { remote, limits: opts.limits });
    } catch (e) {
      s.ch.close(C.Incompatible, "incompatible schema");
      throw e;
    }
    const c = new Connection(opts, rep);
    c.start(s);
    return c;
  }

  /** The user the server authenticated. */
  get userId(): string {
    return this.welcomeMsg.userId;
  }

  /** The server's session ID for this connection. */
  get sessionId(): bigint {
    return this.welcomeMsg.session;
  }

  /** Whether the current session resumed the one before it (§10.5): the replica was kept. */
  get resumed(): boolean {
    return this.welcomeMsg.resumed;
  }

  /** The server's ticks per second. */
  get tickRate(): number {
    return this.welcomeMsg.tickRate;
  }

  /** The transport of the current session. */
  get transport(): "webtransport" | "websocket" {
    return this.ch.kind;
  }

  /** Resolves when the connection closes. */
  done(): Promise<ClosedError> {
    if (this.closed) return Promise.resolve(this.closed);
    return new Promise((res) => this.closeWaiters.push(res));
  }

  private start(s: Session): void {
    this.ch = s.ch;
    this.welcomeMsg = s.welcome;
    this.ticket = s.welcome.ticket;
    this.pending = null;
    this.segs = [];
    this.resync = false;
    this.closed = undefined;
    const ch = s.ch;
    const idle = this.opts.idleTimeoutMs ?? 15000;
    const onmessage = (data: unknown): void => {
      if (ch !== this.ch) return;
      this.touch(idle);
      const b = toBytes(data);
      if (!b) return this.fail(new ReplicaDecodeError("session", "text message"));
      this.bytesReceived += b.length;
      this.receive(b);
    };
    const onclose = (code: number, reason: string): void => {
      if (ch === this.ch) this.finish(code, reason);
    };
    ch.onmessage = onmessage;
    ch.onclose = onclose;
    this.touch(idle);
    this.pingTimer = setInterval(() => {
      this.nonce++;
      this.send(encodePing(this.nonce));
    }, Math.max(1, Math.floor(idle / 3)));
    for (const data of s.early) onmessage(data);
    if (s.earlyClose) onclose(s.earlyClose.code, s.earlyClose.reason);
  }

  private touch(idle: number): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.close(C.IdleTimeout, "nothing received from the server"), idle);
  }

  private send(b: Uint8Array): void {
    if (!this.closed) this.ch.send(b);
  }

  private fail(err: Error): void {
    this.onError?.(err);
    this.close(C.ProtocolError, err instanceof ReplicaDecodeError && err.code !== "session" ? "bad tick" : err.message.slice(0, 123));
  }

  private receive(b: Uint8Array): void {
    if (this.pending) {
      this.segs.push(b);
      if (this.segs.length === this.pending.segments) this.applyPending();
      return;
    }
    let m;
    try {
      m = parseMessage(b);
    } catch (e) {
      return this.fail(e as Error);
    }
    switch (m.type) {
      case MsgType.Tick:
        this.pending = m;
        this.segs = [];
        if (m.segments === 0) this.applyPending();
        return;
      case MsgType.Ping:
        this.send(encodePong(m.nonce));
        return;
      case MsgType.Pong:
        return;
      case MsgType.Resync:
        // The next tick is the full state: the replica is reset just before it applies.
        this.resync = true;
        return;
      case MsgType.RPC:
        return this.runRPC(b);
      default:
        return this.fail(new ReplicaDecodeError("session", `unexpected message type ${m.type}`));
    }
  }

  private applyPending(): void {
    const t = this.pending!;
    const segs = this.segs;
    this.pending = null;
    this.segs = [];
    const before = this.replica.ticksApplied;
    const t0 = now();
    try {
      if (this.resync) {
        this.resync = false;
        this.replica.reset();
      }
      this.replica.applyTick(segs, { gained: t.gained, lost: t.lost, levels: t.levels });
    } catch (e) {
      if (this.replica.ticksApplied === before) {
        // Rejected: the replica keeps the last good state; a new session is
        // needed (§10.4), with the full state: resuming would declare the
        // replica the server's ticks no longer fit.
        this.ticket = NO_TICKET;
        return this.fail(e as Error);
      }
      // Applied, but a callback threw: report it and go on.
      this.onError?.(e as Error);
    }
    this.lastApplyMs = now() - t0;
    this.lastTick = t.tick;
    this.applied = true;
    this.onTick?.(t.tick);
  }

  /**
   * Registers h for server→client RPC rpc (its ID) on entities of class
   * (a class, its name or ID). Returns a function that unregisters it.
   */
  handleRPC(cls: StructType | string | number, rpc: number, h: (e: Entity, args: Rec) => void): () => void {
    const c = typeof cls === "object" ? cls : typeof cls === "string" ? this.opts.schema.classNamed(cls) : this.opts.schema.class(cls);
    if (!c) throw new Error(`connection: no class ${String(cls)}`);
    const key = `${c.classId}/${rpc}`;
    this.handlers.set(key, [...(this.handlers.get(key) ?? []), h]);
    return () => this.handlers.set(key, (this.handlers.get(key) ?? []).filter((x) => x !== h));
  }

  private runRPC(msg: Uint8Array): void {
    let m;
    try {
      m = parseRPC(msg);
    } catch (e) {
      return this.fail(e as Error);
    }
    const e = this.replica.entity(m.entity);
    if (!e) return; // destroyed since: dropped
    const hs = this.handlers.get(`${e.classId}/${m.rpc}`);
    if (!hs || hs.length === 0) return;
    const local = this.opts.schema.class(e.classId)?.rpc(m.rpc);
    const remote = this.replica.remote.class(e.classId)?.rpc(m.rpc);
    if (!local || !remote || remote.dir !== 1) {
      return this.fail(new ReplicaDecodeError("session", `server sent unknown RPC ${m.rpc} on ${e.type.name}`));
    }
    let args: Rec;
    try {
      args = this.replica.decoder.decodeRecord(remote.args, local.args, m.args);
    } catch (err) {
      return this.fail(err as Error);
    }
    for (const h of hs) h(e, args);
  }

  /**
   * Calls client→server RPC rpc (its ID or name) on entity e, which this
   * client owns, with the arguments given by field name (see
   * encodeRecord). The server runs it at its next tick.
   */
  callRPC(e: Entity | number, rpc: number | string, args: Record<string, unknown> = {}): void {
    const ent = typeof e === "number" ? this.replica.entity(e) : e;
    if (!ent) throw new Error(`connection: no entity ${String(e)}`);
    const cls = this.opts.schema.class(ent.classId);
    const r = typeof rpc === "number" ? cls?.rpc(rpc) : cls?.rpcs.find((x) => x.name === rpc);
    if (!r || r.dir !== 0) throw new Error(`connection: no client RPC ${String(rpc)} on ${ent.type.name}`);
    this.send(encodeRPC(ent.id, r.id, encodeRecord(r.args, args)));
  }

  /**
   * Calls client→server RPC rpc on entity (which this client owns), with
   * the argument record already encoded (§6.1 record(T)).
   */
  sendRPC(entity: number, rpc: number, args: Uint8Array): void {
    this.send(encodeRPC(entity, rpc, args));
  }

  /** Sends raw bytes (tests and tools). */
  sendRaw(b: Uint8Array): void {
    this.send(b);
  }

  /** Leaves the session with the given close code (§10.1). */
  close(code: number = C.Normal, reason = "client left"): void {
    if (this.closed) return;
    this.ch.close(code, reason);
    this.finish(code, reason);
  }

  private finish(code: number, reason: string): void {
    if (this.closed) return;
    clearInterval(this.pingTimer);
    clearTimeout(this.idleTimer);
    this.closed = new ClosedError(code, reason);
    this.onClose?.(this.closed);
    for (const w of this.closeWaiters.splice(0)) w(this.closed);
  }

  /**
   * Closes the session if it is open and starts a new one with the same
   * server, keeping the replica and its callbacks.
   *
   * When the last WELCOME carried a resume ticket, a tick of its session
   * was applied and the replica holds at most 8,192 entities, the HELLO
   * asks to resume (§10.5), declaring the last tick applied and what the
   * replica holds (Entity.level, nbands meaning every band). If the server resumes,
   * the replica is kept and the first tick catches it up, its callbacks
   * reporting only what changed meanwhile; a resumed WELCOME whose
   * descriptor differs from the last one closes with code 2 and rejects.
   * Otherwise the replica is reset and the first tick is the full state.
   * After a rejected tick there is no ticket: the next session starts over.
   */
  async reconnect(): Promise<void> {
    this.close(C.Normal, "reconnecting");
    const token = this.opts.refresh ? tokenBytes(await this.opts.refresh()) : tokenBytes(this.opts.token);
    let resume: ResumeRequest | undefined;
    const t = this.ticket;
    if ((t[0] !== 0n || t[1] !== 0n) && this.applied && this.replica.size <= MAX_RESUME) {
      resume = { block: { ticket: t, tick: this.lastTick, held: this.replica.entities() }, descriptor: this.welcomeMsg.descriptor };
    }
    let s: Session;
    try {
      s = await handshake(this.opts, token, this.replica.limits, resume);
    } catch (e) {
      // A server that resumes with another schema is not offered the session again.
      if (e instanceof ReplicaDecodeError) this.ticket = NO_TICKET;
      throw e;
    }
    if (!s.welcome.resumed) {
      this.replica.reset(decodeDescriptor(s.welcome.descriptor));
      this.lastTick = 0n;
      this.applied = false;
    }
    this.start(s);
  }
}

const now = (): number => (typeof performance !== "undefined" ? performance.now() : Date.now());

/**
 * Opens a channel with the transport opts ask for: WebTransport first in
 * "auto" mode when there is a URL and a constructor for it, WebSocket if it
 * fails to connect.
 */
async function openChannel(opts: ConnectOptions, limits: Limits | Partial<Limits> | undefined): Promise<Channel> {
  const mode = opts.transport ?? "auto";
  const WT = opts.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
  const WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  const tryWT = mode === "webtransport" || (mode === "auto" && WT !== undefined && opts.webTransportUrl !== undefined);
  let wtErr: Error | undefined;
  if (tryWT) {
    if (!WT) throw new Error("no WebTransport: pass a constructor as options.WebTransport");
    if (!opts.webTransportUrl) throw new Error("no WebTransport URL: set options.webTransportUrl");
    const maxMsg = opts.maxMessageBytes ?? Math.max(1 << 20, limits?.maxSegmentBytes ?? 0);
    try {
      const hashes = typeof opts.certificateHashes === "function" ? await opts.certificateHashes() : (opts.certificateHashes ?? []);
      return await openWebTransport(opts.webTransportUrl, WT, hashes, maxMsg);
    } catch (e) {
      if (mode === "webtransport") throw connectError(e);
      wtErr = e as Error;
    }
  }
  if (!WS) throw wtErr ?? new Error("no WebSocket: pass a constructor as options.WebSocket");
  if (!opts.url) throw wtErr ?? new Error("no WebSocket URL: set options.url");
  try {
    return await openWebSocket(opts.url, WS);
  } catch (e) {
    throw connectError(e);
  }
}

/** The error a failed connect rejects with. */
function connectError(e: unknown): Error {
  if (e instanceof ChannelError) {
    return e.code > 0 ? new RefusedError(e.code, e.reason) : new ClosedError(e.code < 0 ? C.Network : e.code, e.reason);
  }
  return e as Error;
}

/**
 * Opens a channel and runs the client side of the handshake (§10.3),
 * asking to resume when resume is given (§10.5).
 */
async function handshake(opts: ConnectOptions, token: Uint8Array, limits?: Limits, resume?: ResumeRequest): Promise<Session> {
  const descriptor = opts.schema.descriptor;
  if (!descriptor) throw new Error("connection: the schema was not decoded from a descriptor");
  const hello = encodeHello({
    version: PROTOCOL_VERSION,
    descriptor,
    token,
    limits: limits ?? opts.limits,
    resume: resume?.block,
  });
  const timeoutMs = opts.handshakeTimeoutMs ?? 5000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ClosedError(C.HandshakeTimeout, "handshake timeout")), timeoutMs);
  });
  let ch: Channel | undefined;
  const opening = openChannel(opts, limits ?? opts.limits).then((c) => (ch = c));
  try {
    await Promise.race([opening, timeout]);
  } catch (e) {
    clearTimeout(timer);
    // A channel that opens after the timeout is closed at once.
    void opening.then((c) => c.close(C.Normal, "handshake failed"), () => {});
    throw e;
  }
  return new Promise<Session>((resolve, reject) => {
    const c = ch!;
    let done = false;
    const end = (err?: Error, s?: Session, code: number = C.Normal): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) {
        c.close(code, code === C.Normal ? "handshake failed" : err.message.slice(0, 123));
        reject(err);
      } else resolve(s!);
    };
    void timeout.catch((e: Error) => end(e));
    c.onclose = (code, reason) => {
      // The close carries the REFUSE's code and reason, should the REFUSE itself be lost.
      end(code > 0 ? new RefusedError(code, reason) : new ClosedError(code, reason || "closed during the handshake"));
    };
    c.onmessage = (data) => {
      const b = toBytes(data);
      try {
        if (!b) throw new ReplicaDecodeError("session", "text message");
        const m = parseMessage(b);
        if (m.type === MsgType.Refuse) return end(new RefusedError(m.code, m.message));
        if (m.type !== MsgType.Welcome) throw new ReplicaDecodeError("session", `expected WELCOME, got type ${m.type}`);
        if (m.version !== PROTOCOL_VERSION) {
          throw new ReplicaDecodeError("session", `server speaks protocol ${m.version}, this client ${PROTOCOL_VERSION}`);
        }
        if (m.resumed && !(resume && equal(m.descriptor, resume.descriptor))) {
          const why = resume ? "resumed with another descriptor" : "resumed a session the client did not ask to resume";
          return end(new ReplicaDecodeError("session", `WELCOME ${why}`), undefined, C.ProtocolError);
        }
        decodeDescriptor(m.descriptor); // fails here rather than after the handshake
        done = true;
        clearTimeout(timer);
        const s: Session = { ch: c, welcome: m, early: [] };
        c.onmessage = (data) => s.early.push(data);
        c.onclose = (code, reason) => (s.earlyClose = { code, reason });
        resolve(s);
      } catch (e) {
        end(e as Error);
      }
    };
    c.send(hello);
  });
}
