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
 * WebSocket when WebTransport fails to connect or does not in time
 * (ConnectOptions.handshakeTimeoutMs).
 */

import { ClosedError, RefusedError, ReplicaDecodeError, misuse, sessionError } from "./errors.js";
import { encodeUTF8 } from "./bits.js";
import { openWebSocket, openWebTransport, type Channel, type WebSocketConstructor, type WebTransportConstructor } from "./transport.js";
import { decodeDescriptor } from "./descriptor.js";
import type { Limits } from "./decoder.js";
import { Replica, report } from "./replica.js";
import { encodeRecord } from "./encoder.js";
import { named, type Rpc, type Schema, type StructType } from "./schema.js";
import { equal, type Entity, type Rec } from "./state.js";
import { MAX_RESUME, PROTOCOL_VERSION, bad, encodeHello, encodePing, encodePong, encodeRPC, parseMessage, type Message, type Resume, type Ticket, type Tick, type Welcome } from "./session.js";
import { CloseCode as C, MsgType } from "./enums.js";

export { ClosedError, RefusedError } from "./errors.js";

/** Close codes (§10.1); on WebSocket the status is 4000 + code. */
export const CloseCode = named<typeof C>(
  "Normal GoingAway ProtocolError MessageTooLarge SlowConsumer IdleTimeout HandshakeTimeout AuthFailed Incompatible PolicyViolation Internal Network ServerBusy Replaced Duplicate",
);
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
  /**
   * Bounds the handshake, from opening the transport to the WELCOME;
   * default 5000 ms. In "auto" mode WebTransport has 60 % of it to connect
   * (3 s by default: Chromium gives up on QUIC after about 4 s when UDP is
   * blocked, which would leave WebSocket too little); when it fails or runs
   * out, the WebSocket attempt starts with the whole timeout again, so a
   * connection that falls back takes at most 1.6 times it.
   */
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
  /**
   * The number of the last tick applied (0n before the first). A resumed
   * session (§10.5) keeps it until its catch-up tick applies.
   */
  lastTick = 0n;
  /** Called after each applied tick. */
  declare onTick: ((tick: bigint) => void) | undefined;
  /**
   * Called when a tick is rejected (the connection then closes with code
   * 2) or a message is malformed (where undefined), and for each exception
   * a callback throws: the replica's, an RPC handler, onTick (where names
   * it, as Replica.onError does; err is what was thrown). Unset, callbacks'
   * exceptions go to console.error. A callback that throws keeps no other
   * from running, and its tick is applied all the same.
   */
  declare onError: ((err: Error, where?: string) => void) | undefined;
  /** Called once when the connection closes. */
  declare onClose: ((err: ClosedError) => void) | undefined;
  /** Message bytes received since the connection was made, handshakes included. */
  bytesReceived = 0;
  /** Milliseconds the last tick took to decode and apply, callbacks included. */
  lastApplyMs = 0;
  // The session's facts: set from its WELCOME when it starts (the first
  // one in the constructor).
  /** The user the server authenticated. */
  declare userId: string;
  /** The server's session ID for this connection. */
  declare sessionId: bigint;
  /** Whether the current session resumed the one before it (§10.5): the replica was kept. */
  declare resumed: boolean;
  /** The server's ticks per second. */
  declare tickRate: number;
  /** The transport of the current session. */
  declare transport: Channel["kind"];
  declare readonly replica: Replica;

  /** Resolves when the connection closes. */
  declare done: () => Promise<ClosedError>;
  /**
   * Registers h for server→client RPC rpc (its ID) on entities of class
   * (a class, its name or ID). Returns a function that unregisters it.
   */
  declare handleRPC: (cls: StructType | string | number, rpc: number, h: (e: Entity, args: Rec) => void) => () => void;
  /**
   * Calls client→server RPC rpc (its ID or name) on entity e, which this
   * client owns, with the arguments given by field name (see
   * encodeRecord). The server runs it at its next tick. It throws, sending
   * nothing, for a call the server would close the connection for: on an
   * entity the replica does not hold as owned (Entity.owned, as of the
   * last tick applied), and one whose message is over the largest the
   * server takes (its WELCOME says; replica's Config.MaxRPCBytes, 16 KiB by
   * default); and for an RPC the entity's class has not, or arguments of
   * the wrong type (encodeRecord).
   */
  declare callRPC: (e: Entity | number, rpc: number | string, args?: Record<string, unknown>) => void;
  /**
   * Calls client→server RPC rpc on entity (which this client owns), with
   * the argument record already encoded (§6.1 record(T)).
   */
  declare sendRPC: (entity: number, rpc: number, args: Uint8Array) => void;
  /** Sends raw bytes (tests and tools). */
  declare sendRaw: (b: Uint8Array) => void;
  /** Leaves the session with the given close code (§10.1); default 0, "client left". */
  declare close: (code?: number, reason?: string) => void;
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
  declare reconnect: () => Promise<void>;

  // The connection's own state is locals of the constructor, which its
  // methods close over.
  private constructor(o: ConnectOptions, rep: Replica, first: Session) {
    this.replica = rep;
    const c = this;
    const idle = o.idleTimeoutMs ?? 15000;
    let ch: Channel;
    /** The last WELCOME's descriptor. */
    let descriptor: Uint8Array;
    /** The ticket reconnect offers the server (§10.5): the last WELCOME's, or none after a rejected tick. */
    let ticket = NO_TICKET;
    /** A tick of this session's state was applied: the replica can resume. */
    let applied = false;
    /** The largest message the server takes (the WELCOME's; 0: not stated). */
    let maxMessage = 0;
    let pending: Tick | null;
    let segs: Uint8Array[] = [];
    let resync: boolean;
    let nonce = 0n;
    let pingTimer: ReturnType<typeof setInterval> | undefined;
    let idleTimer: ReturnType<typeof setTimeout> | undefined;
    const handlers = new Map<string, ((e: Entity, args: Rec) => void)[]>();
    let closed: ClosedError | undefined;
    let closeWaiters: ((e: ClosedError) => void)[] = [];

    /** Reports an exception of callback where to onError, else to the console. */
    const thrown = (rep.onError = (err: unknown, where: string): void => report(c.onError as Replica["onError"], err, where));
    /** Runs a game's callback fn, reporting what it throws as thrown by where. */
    const call = (where: string, fn: () => void): void => {
      try {
        fn();
      } catch (err) {
        thrown(err, where);
      }
    };
    const touch = (): void => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => close(C.IdleTimeout, "idle"), idle);
    };
    const send = (b: Uint8Array): void => void (closed || ch.send(b));
    const fail = (err: Error): void => {
      c.onError?.(err);
      close(C.ProtocolError, err instanceof ReplicaDecodeError && err.code !== "session" ? "bad tick" : err.message);
    };
    const finish = (code: number, reason: string): void => {
      if (closed) return;
      clearInterval(pingTimer);
      clearTimeout(idleTimer);
      closed = new ClosedError(code, reason);
      c.onClose?.(closed);
      for (const w of closeWaiters) w(closed);
      closeWaiters = [];
    };
    const close = (c.close = (code = C.Normal, reason = "client left") => {
      if (closed) return;
      ch.shut(code, reason);
      finish(code, reason);
    });

    const applyPending = (): void => {
      const t = pending!;
      const before = rep.ticksApplied;
      const t0 = performance.now();
      pending = null;
      try {
        if (resync) {
          resync = false;
          rep.reset();
        }
        rep.applyTick(segs, t);
      } catch (e) {
        if (rep.ticksApplied === before) {
          // Rejected: the replica keeps the last good state; a new session is
          // needed (§10.4), with the full state: resuming would declare the
          // replica the server's ticks no longer fit.
          ticket = NO_TICKET;
          return fail(e as Error);
        }
        // Applied, but onError threw (callbacks' own exceptions are reported): go on.
        report(undefined, e, "onError");
      }
      c.lastApplyMs = performance.now() - t0;
      c.lastTick = t.tick;
      applied = true;
      call("onTick", () => c.onTick?.(t.tick));
    };

    const receive = (b: Uint8Array): void => {
      if (pending) {
        if (segs.push(b) === pending.segments) applyPending();
        return;
      }
      let m: Message;
      try {
        m = parseMessage(b);
      } catch (e) {
        return fail(e as Error);
      }
      const type = m.type;
      if (type === MsgType.Tick) {
        pending = m;
        segs = [];
        if (!m.segments) applyPending();
      } else if (type === MsgType.Ping) send(encodePong(m.nonce));
      // The next tick is the full state: the replica is reset just before it applies.
      else if (type === MsgType.Resync) resync = true;
      else if (type === MsgType.RPC) {
        const e = rep.entity(m.entity);
        const hs = e && handlers.get(e.classId + "/" + m.rpc);
        if (!hs?.length) return; // destroyed since, or not handled: dropped
        const rpcOf = (s: Schema): Rpc | undefined => s.class(e!.classId)?.rpc(m.rpc);
        const local = rpcOf(o.schema);
        const remote = rpcOf(rep.remote);
        let args: Rec;
        try {
          if (!local || remote?.dir !== 1) bad("RPC " + m.rpc);
          args = rep.decoder.decodeRecord(remote!.args, local!.args, m.args);
        } catch (err) {
          return fail(err as Error);
        }
        for (const h of hs) call(`handleRPC(${e!.type.name}, ${m.rpc})`, () => h(e!, args));
      } else if (type !== MsgType.Pong) fail(sessionError("type " + type));
    };

    const start = (s: Session): void => {
      const sc = (ch = s.ch);
      const w = s.welcome;
      descriptor = w.descriptor;
      ticket = w.ticket;
      c.userId = w.userId;
      c.sessionId = w.session;
      c.resumed = w.resumed;
      c.tickRate = w.tickRate;
      maxMessage = w.maxMessage;
      c.transport = sc.kind;
      pending = null;
      resync = false;
      closed = undefined;
      const onData = (data: unknown): void => {
        if (sc !== ch) return;
        touch();
        const b = toBytes(data);
        if (!b) return fail(sessionError("text message"));
        c.bytesReceived += b.length;
        receive(b);
      };
      const onEnd = (code: number, reason: string): void => void (sc === ch && finish(code, reason));
      touch();
      pingTimer = setInterval(() => send(encodePing(++nonce)), Math.max(1, Math.floor(idle / 3)));
      const go = (): void => {
        if (sc !== ch || closed) return;
        sc.onData = onData;
        sc.onEnd = onEnd;
        s.early.forEach(onData);
        if (s.earlyClose) onEnd(...s.earlyClose);
      };
      // Messages that came with the WELCOME (and those that follow them) wait
      // for a later task: connect and reconnect resolve first, and the code
      // that awaits them registers its callbacks before the first tick applies.
      if (s.early.length || s.earlyClose) setTimeout(go);
      else go();
    };

    c.done = () => new Promise((res) => (closed ? res(closed) : closeWaiters.push(res)));
    c.handleRPC = (cls, rpc, h) => {
      const k = (typeof cls === "object" ? cls : (o.schema.lookup(cls) ?? misuse("no class " + cls))).classId + "/" + rpc;
      handlers.set(k, [...(handlers.get(k) ?? []), h]);
      return () => handlers.set(k, handlers.get(k)!.filter((x) => x !== h));
    };
    c.callRPC = (e, rpc, args = {}) => {
      const ent = typeof e === "number" ? rep.entity(e) : e;
      const on = `${rpc} on ${ent ? ent.type.name + " " + ent.id : "entity " + e}`;
      // Sent, a call on an entity this client does not own would close the
      // connection (code 9), as Go's CallRPC refuses it (ErrNotOwned): one
      // not held (yet, or any longer), another replica's, another client's.
      if (!ent || rep.entity(ent.id) !== ent || !ent.owned) misuse(`RPC ${on}: not owned by this client`);
      const rpcs = o.schema.class(ent!.classId)?.rpcs.filter((x) => !x.dir) ?? [];
      const r = rpcs.find((x) => x.id === rpc || x.name === rpc) ?? misuse(`no client RPC ${on}; ${ent!.type.name}'s client RPCs: ${rpcs.map((x) => x.name).join(", ") || "none"}`);
      const msg = encodeRPC(ent!.id, r.id, encodeRecord(r.args, args));
      // Sent, a message over the server's limit would close the connection.
      if (maxMessage && msg.length > maxMessage) misuse(`RPC ${r.name} is ${msg.length} bytes, the server takes ${maxMessage}`);
      send(msg);
    };
    c.sendRPC = (entity, rpc, args) => send(encodeRPC(entity, rpc, args));
    c.sendRaw = send;
    c.reconnect = async () => {
      close(C.Normal, "reconnecting");
      const token = tokenBytes(o.refresh ? await o.refresh() : o.token);
      const resume = (ticket[0] || ticket[1]) && applied && rep.size <= MAX_RESUME ? { block: { ticket, tick: c.lastTick, held: rep.entities() }, descriptor } : undefined;
      let s: Session;
      try {
        s = await handshake(o, token, rep.limits, resume);
      } catch (e) {
        // A server that resumes with another schema is not offered the session again.
        if (e instanceof ReplicaDecodeError) ticket = NO_TICKET;
        throw e;
      }
      if (!s.welcome.resumed) {
        rep.reset(s.remote);
        c.lastTick = 0n;
        applied = false;
      }
      start(s);
    };
    start(first);
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
      s.ch.shut(C.Incompatible, "incompatible schema");
      throw e;
    }
    return new Connection(opts, rep, s);
  }
}

/**
 * Opens a channel with the transport opts ask for: WebTransport first in
 * "auto" mode when there is a URL and a constructor for it, WebSocket if it
 * fails to connect or does not within 60 % of the handshake timeout ms;
 * restart then gives the handshake its whole timeout again.
 */
async function openChannel(opts: ConnectOptions, limits: Partial<Limits> | undefined, ms: number, restart: () => void): Promise<Channel> {
  const mode = opts.transport ?? "auto";
  const g = globalThis as { WebTransport?: WebTransportConstructor; WebSocket?: WebSocketConstructor };
  const WT = opts.WebTransport ?? g.WebTransport;
  const WS = opts.WebSocket ?? g.WebSocket;
  const url = opts.webTransportUrl;
  let err: Error | undefined;
  if (mode === "webtransport" || (mode === "auto" && WT && url)) {
    const attempt = (async () => {
      if (!WT) misuse('no WebTransport: pass options.WebTransport, or use transport "websocket"');
      if (!url) misuse("no webTransportUrl");
      const h = opts.certificateHashes;
      return openWebTransport(url, WT, typeof h === "function" ? await h() : h, opts.maxMessageBytes ?? Math.max(1 << 20, limits?.maxSegmentBytes ?? 0));
    })();
    if (mode !== "auto") return attempt;
    let timer;
    try {
      return await Promise.race([attempt, new Promise<never>((_, no) => (timer = setTimeout(no, ms * 0.6, new ClosedError(C.HandshakeTimeout, "WebTransport: timeout"))))]);
    } catch (e) {
      err = e as Error;
      // A session that opens after its deadline is not used.
      attempt.then((ch) => ch.shut(C.Normal, "fell back to WebSocket"), () => {});
      restart();
    } finally {
      clearTimeout(timer);
    }
  }
  if (!WS || !opts.url)
    throw err ?? misuse(WS ? "no url" : "no WebSocket: pass options.WebSocket (Node 20: the ws package's, or node --experimental-websocket)");
  return openWebSocket(opts.url, WS);
}

/**
 * Opens a channel and runs the client side of the handshake (§10.3),
 * asking to resume when resume is given (§10.5).
 */
const handshake = (opts: ConnectOptions, token: Uint8Array, limits = opts.limits, resume?: ResumeRequest): Promise<Session> => {
  const descriptor = opts.schema.descriptor;
  if (!descriptor) misuse("schema not decoded from a descriptor");
  const hello = encodeHello({ descriptor, token, limits, resume: resume?.block });
  return new Promise<Session>((resolve, reject) => {
    let ch: Channel | undefined;
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const end = (err: Error, code: number = C.Normal): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      ch?.shut(code, code ? err.message : "handshake failed");
      reject(err);
    };
    const ms = opts.handshakeTimeoutMs ?? 5000;
    /** (Re)starts the handshake's timeout: at the start, and for the WebSocket attempt after WebTransport's. */
    const arm = (): void => {
      clearTimeout(timer);
      if (!done) timer = setTimeout(() => end(new ClosedError(C.HandshakeTimeout, "timeout")), ms);
    };
    arm();
    openChannel(opts, limits, ms, arm).then((c) => {
      // A channel that opens after the timeout is closed at once.
      if (done) return c.shut(C.Normal, "handshake failed");
      ch = c;
      // The close carries the REFUSE's code and reason, should the REFUSE itself be lost.
      c.onEnd = (code, reason) => end(code > 0 ? new RefusedError(code, reason) : new ClosedError(code, reason || "closed"));
      c.onData = (data) => {
        try {
          const m = parseMessage(toBytes(data) ?? bad("text message"));
          if (m.type === MsgType.Refuse) return end(new RefusedError(m.code, m.message));
          if (m.type !== MsgType.Welcome) throw sessionError("type " + m.type);
          if (m.version !== PROTOCOL_VERSION) throw sessionError("protocol " + m.version);
          if (m.resumed && !(resume && equal(m.descriptor, resume.descriptor))) {
            return end(sessionError(resume ? "resumed with another descriptor" : "resumed, did not ask to resume"), C.ProtocolError);
          }
          const s: Session = { ch: c, welcome: m, remote: decodeDescriptor(m.descriptor), early: [] };
          done = true;
          clearTimeout(timer);
          c.onData = (data) => s.early.push(data);
          c.onEnd = (code, reason) => (s.earlyClose = [code, reason]);
          resolve(s);
        } catch (e) {
          end(e as Error);
        }
      };
      c.send(hello);
    }, end);
  });
};
