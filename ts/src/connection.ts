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

import { ClosedError, RefusedError, ReplicaDecodeError, fail } from "./errors.js";
import { encodeUTF8 } from "./bits.js";
import { openWebSocket, openWebTransport, type Channel, type WebSocketConstructor, type WebTransportConstructor } from "./transport.js";
import { decodeDescriptor } from "./descriptor.js";
import type { Limits } from "./decoder.js";
import { Replica } from "./replica.js";
import { encodeRecord } from "./encoder.js";
import type { Schema, StructType } from "./schema.js";
import { equal, type Entity, type Rec } from "./state.js";
import { MAX_RESUME, PROTOCOL_VERSION, encodeHello, encodePing, encodePong, encodeRPC, parseMessage, type Message, type RPC, type Resume, type Ticket, type Tick, type Welcome } from "./session.js";
import { CloseCode as C, MsgType } from "./enums.js";

export { ClosedError, RefusedError } from "./errors.js";

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

/** A message's bytes, or undefined for a text message. */
const toBytes = (data: unknown): Uint8Array | undefined =>
  data instanceof ArrayBuffer ? new Uint8Array(data) : ArrayBuffer.isView(data) ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : undefined;

const tokenBytes = (t: Uint8Array | string = ""): Uint8Array => (typeof t === "string" ? encodeUTF8(t) : t);

/** A session whose handshake is done: its channel, WELCOME and the server's schema. */
interface Session {
  ch: Channel;
  welcome: Welcome;
  remote: Schema;
  /** Messages and a close that arrived after the WELCOME, before the session started. */
  early: unknown[];
  earlyClose?: [number, string];
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
  /** The last WELCOME's descriptor. */
  private descriptor!: Uint8Array;
  /** The ticket reconnect offers the server (§10.5): the last WELCOME's, or none after a rejected tick. */
  private ticket = NO_TICKET;
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
  /** The user the server authenticated. */
  userId = "";
  /** The server's session ID for this connection. */
  sessionId = 0n;
  /** Whether the current session resumed the one before it (§10.5): the replica was kept. */
  resumed = false;
  /** The server's ticks per second. */
  tickRate = 0;
  /** The transport of the current session. */
  transport: Channel["kind"] = "websocket";

  private readonly opts: ConnectOptions;

  private constructor(
    opts: ConnectOptions,
    readonly replica: Replica,
  ) {
    this.opts = opts;
  }

  /**
   * Connects, performs the handshake (§10.3) and starts receiving ticks.
   * No tick applies before the code after `await connect()` has run (ticks
   * that came with the WELCOME apply in a later task), so callbacks
   * registered right away see the first full state.
   */
  static async connect(opts: ConnectOptions): Promise<Connection> {
    const s = await handshake(opts, tokenBytes(opts.token));
    let rep: Replica;
    try {
      rep = new Replica(opts.schema, { remote: s.remote, limits: opts.limits });
    } catch (e) {
      s.ch.close(C.Incompatible, "incompatible schema");
      throw e;
    }
    const c = new Connection(opts, rep);
    c.start(s);
    return c;
  }

  /** Resolves when the connection closes. */
  done(): Promise<ClosedError> {
    return new Promise((res) => (this.closed ? res(this.closed) : this.closeWaiters.push(res)));
  }

  private start(s: Session): void {
    const ch = (this.ch = s.ch);
    const w = s.welcome;
    this.descriptor = w.descriptor;
    this.ticket = w.ticket;
    this.userId = w.userId;
    this.sessionId = w.session;
    this.resumed = w.resumed;
    this.tickRate = w.tickRate;
    this.transport = ch.kind;
    this.pending = null;
    this.resync = false;
    this.closed = undefined;
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
    this.touch(idle);
    this.pingTimer = setInterval(() => this.send(encodePing(++this.nonce)), Math.max(1, Math.floor(idle / 3)));
    const go = (): void => {
      if (ch !== this.ch || this.closed) return;
      ch.onmessage = onmessage;
      ch.onclose = onclose;
      for (const data of s.early) onmessage(data);
      if (s.earlyClose) onclose(...s.earlyClose);
    };
    // Messages that came with the WELCOME (and those that follow them) wait
    // for a later task: connect and reconnect resolve first, and the code
    // that awaits them registers its callbacks before the first tick applies.
    if (s.early.length || s.earlyClose) setTimeout(go);
    else go();
  }

  private touch(idle: number): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.close(C.IdleTimeout, "nothing received from the server"), idle);
  }

  private send(b: Uint8Array): void {
    if (!this.closed) this.ch.send(b);
  }

  private fail(err: Error): void {
    this.onError?.(err);
    this.close(C.ProtocolError, err instanceof ReplicaDecodeError && err.code !== "session" ? "bad tick" : err.message);
  }

  private receive(b: Uint8Array): void {
    const t = this.pending;
    if (t) {
      if (this.segs.push(b) === t.segments) this.applyPending();
      return;
    }
    let m: Message;
    try {
      m = parseMessage(b);
    } catch (e) {
      return this.fail(e as Error);
    }
    if (m.type === MsgType.Tick) {
      this.pending = m;
      this.segs = [];
      if (!m.segments) this.applyPending();
    } else if (m.type === MsgType.Ping) this.send(encodePong(m.nonce));
    // The next tick is the full state: the replica is reset just before it applies.
    else if (m.type === MsgType.Resync) this.resync = true;
    else if (m.type === MsgType.RPC) this.runRPC(m);
    else if (m.type !== MsgType.Pong) this.fail(new ReplicaDecodeError("session", "unexpected message type " + m.type));
  }

  private applyPending(): void {
    const t = this.pending!;
    const rep = this.replica;
    const before = rep.ticksApplied;
    const t0 = performance.now();
    this.pending = null;
    try {
      if (this.resync) {
        this.resync = false;
        rep.reset();
      }
      rep.applyTick(this.segs, t);
    } catch (e) {
      if (rep.ticksApplied === before) {
        // Rejected: the replica keeps the last good state; a new session is
        // needed (§10.4), with the full state: resuming would declare the
        // replica the server's ticks no longer fit.
        this.ticket = NO_TICKET;
        return this.fail(e as Error);
      }
      // Applied, but a callback threw: report it and go on.
      this.onError?.(e as Error);
    }
    this.lastApplyMs = performance.now() - t0;
    this.lastTick = t.tick;
    this.applied = true;
    this.onTick?.(t.tick);
  }

  /**
   * Registers h for server→client RPC rpc (its ID) on entities of class
   * (a class, its name or ID). Returns a function that unregisters it.
   */
  handleRPC(cls: StructType | string | number, rpc: number, h: (e: Entity, args: Rec) => void): () => void {
    const c = typeof cls === "object" ? cls : this.opts.schema.find(cls);
    if (!c) throw new Error("connection: no class " + cls);
    const key = c.classId + "/" + rpc;
    const hs = this.handlers;
    hs.set(key, [...(hs.get(key) ?? []), h]);
    return () => hs.set(key, hs.get(key)!.filter((x) => x !== h));
  }

  private runRPC(m: RPC): void {
    const e = this.replica.entity(m.entity);
    const hs = e && this.handlers.get(e.classId + "/" + m.rpc);
    if (!hs?.length) return; // destroyed since, or not handled: dropped
    const local = this.opts.schema.class(e!.classId)?.rpc(m.rpc);
    const remote = this.replica.remote.class(e!.classId)?.rpc(m.rpc);
    let args: Rec;
    try {
      if (!local || remote?.dir !== 1) fail("session", `unknown RPC ${m.rpc} of class ${e!.classId}`);
      args = this.replica.decoder.decodeRecord(remote!.args, local!.args, m.args);
    } catch (err) {
      return this.fail(err as Error);
    }
    for (const h of hs) h(e!, args);
  }

  /**
   * Calls client→server RPC rpc (its ID or name) on entity e, which this
   * client owns, with the arguments given by field name (see
   * encodeRecord). The server runs it at its next tick.
   */
  callRPC(e: Entity | number, rpc: number | string, args: Record<string, unknown> = {}): void {
    const ent = typeof e === "number" ? this.replica.entity(e) : e;
    const r = ent && this.opts.schema.class(ent.classId)?.rpcs.find((x) => x.id === rpc || x.name === rpc);
    if (!r || r.dir) throw new Error(`connection: no client RPC ${rpc} on entity ${ent?.id ?? e}`);
    this.send(encodeRPC(ent!.id, r.id, encodeRecord(r.args, args)));
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
    const o = this.opts;
    const rep = this.replica;
    const token = tokenBytes(o.refresh ? await o.refresh() : o.token);
    const t = this.ticket;
    const resume = (t[0] || t[1]) && this.applied && rep.size <= MAX_RESUME ? { block: { ticket: t, tick: this.lastTick, held: rep.entities() }, descriptor: this.descriptor } : undefined;
    let s: Session;
    try {
      s = await handshake(o, token, rep.limits, resume);
    } catch (e) {
      // A server that resumes with another schema is not offered the session again.
      if (e instanceof ReplicaDecodeError) this.ticket = NO_TICKET;
      throw e;
    }
    if (!s.welcome.resumed) {
      rep.reset(s.remote);
      this.lastTick = 0n;
      this.applied = false;
    }
    this.start(s);
  }
}

/**
 * Opens a channel with the transport opts ask for: WebTransport first in
 * "auto" mode when there is a URL and a constructor for it, WebSocket if it
 * fails to connect.
 */
async function openChannel(opts: ConnectOptions, limits: Partial<Limits> | undefined): Promise<Channel> {
  const mode = opts.transport ?? "auto";
  const g = globalThis as { WebTransport?: WebTransportConstructor; WebSocket?: WebSocketConstructor };
  const WT = opts.WebTransport ?? g.WebTransport;
  const WS = opts.WebSocket ?? g.WebSocket;
  const url = opts.webTransportUrl;
  let err: Error | undefined;
  if (mode === "webtransport" || (mode === "auto" && WT && url)) {
    try {
      if (!WT || !url) throw new Error("connection: no WebTransport or webTransportUrl");
      const h = opts.certificateHashes;
      return await openWebTransport(url, WT, typeof h === "function" ? await h() : h, opts.maxMessageBytes ?? Math.max(1 << 20, limits?.maxSegmentBytes ?? 0));
    } catch (e) {
      if (mode !== "auto") throw e;
      err = e as Error;
    }
  }
  if (!WS || !opts.url) throw err ?? new Error("connection: no WebSocket or url");
  return openWebSocket(opts.url, WS);
}

/**
 * Opens a channel and runs the client side of the handshake (§10.3),
 * asking to resume when resume is given (§10.5).
 */
function handshake(opts: ConnectOptions, token: Uint8Array, limits = opts.limits, resume?: ResumeRequest): Promise<Session> {
  const descriptor = opts.schema.descriptor;
  if (!descriptor) throw new Error("connection: the schema was not decoded from a descriptor");
  const hello = encodeHello({ descriptor, token, limits, resume: resume?.block });
  return new Promise<Session>((resolve, reject) => {
    let ch: Channel | undefined;
    let done = false;
    const end = (err: Error, code: number = C.Normal): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      ch?.close(code, code === C.Normal ? "handshake failed" : err.message);
      reject(err);
    };
    const timer = setTimeout(() => end(new ClosedError(C.HandshakeTimeout, "handshake timeout")), opts.handshakeTimeoutMs ?? 5000);
    openChannel(opts, limits).then((c) => {
      // A channel that opens after the timeout is closed at once.
      if (done) return c.close(C.Normal, "handshake failed");
      ch = c;
      // The close carries the REFUSE's code and reason, should the REFUSE itself be lost.
      c.onclose = (code, reason) => end(code > 0 ? new RefusedError(code, reason) : new ClosedError(code, reason || "closed during the handshake"));
      c.onmessage = (data) => {
        try {
          const m = parseMessage(toBytes(data) ?? fail("session", "text message"));
          if (m.type === MsgType.Refuse) return end(new RefusedError(m.code, m.message));
          if (m.type !== MsgType.Welcome) fail("session", "expected WELCOME, got type " + m.type);
          if (m.version !== PROTOCOL_VERSION) fail("session", `server speaks protocol ${m.version}, this client ${PROTOCOL_VERSION}`);
          if (m.resumed && !(resume && equal(m.descriptor, resume.descriptor))) {
            return end(new ReplicaDecodeError("session", "WELCOME " + (resume ? "resumed with another descriptor" : "resumed a session the client did not ask to resume")), C.ProtocolError);
          }
          const s: Session = { ch: c, welcome: m, remote: decodeDescriptor(m.descriptor), early: [] };
          done = true;
          clearTimeout(timer);
          c.onmessage = (data) => s.early.push(data);
          c.onclose = (code, reason) => (s.earlyClose = [code, reason]);
          resolve(s);
        } catch (e) {
          end(e as Error);
        }
      };
      c.send(hello);
    }, end);
  });
}
