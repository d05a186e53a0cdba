// Session messages (docs/protocol.md §10.2) and the WebSocket connection
// (§10.3, §10.4) against an in-process fake server.
import { describe, expect, test } from "vitest";
import { writeDescriptor } from "../src/descriptor.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { Connection, CloseCode, RefusedError } from "../src/connection.js";
import { FrameReader, PREAMBLE, frame, type WebSocketLike, type WebTransportOptionsLike } from "../src/transport.js";
import { DEFAULT_LIMITS } from "../src/decoder.js";
import {
  MsgType, PROTOCOL_VERSION, encodeHello, encodePing, encodePong, encodeRPC, encodeRefuse, encodeResync, encodeTick,
  encodeWelcome, parseMessage, type Hello, type RPC,
} from "../src/session.js";
import { Kind, Schema } from "../src/schema.js";
import { makeId } from "../src/state.js";
import { BitWriter } from "../src/bits.js";
import { field, struct, ty } from "./schemas.js";
import { seg } from "./seg.js";

function rejects(b: Uint8Array, pattern?: RegExp): void {
  try {
    parseMessage(b);
  } catch (e) {
    expect(e).toBeInstanceOf(ReplicaDecodeError);
    expect((e as ReplicaDecodeError).code).toBe("session");
    if (pattern) expect((e as Error).message).toMatch(pattern);
    return;
  }
  throw new Error("accepted");
}

describe("messages", () => {
  test("round trips", () => {
    const desc = Uint8Array.of(1, 2, 3);
    const h = parseMessage(encodeHello({ descriptor: desc, token: Uint8Array.of(9), limits: { maxDepth: 8 } })) as Hello;
    expect(h).toEqual({ type: MsgType.Hello, version: 5, descriptor: desc, token: Uint8Array.of(9), limits: { ...DEFAULT_LIMITS, maxDepth: 8 } });
    const w = { version: 5, descriptor: desc, session: 2n ** 64n - 1n, userId: "ünï", tickRate: 30 };
    expect(parseMessage(encodeWelcome(w))).toEqual({ type: MsgType.Welcome, ...w });
    expect(parseMessage(encodeRefuse({ code: 7, message: "invalid token" }))).toEqual({ type: MsgType.Refuse, code: 7, message: "invalid token" });
    const t = { tick: 123456789012n, segments: 3, gained: [1, 0xffffffff], lost: [makeId(5, 2)], levels: [{ id: 7, level: 4 }, { id: 8, level: 0 }] };
    expect(parseMessage(encodeTick(t))).toEqual({ type: MsgType.Tick, ...t });
    expect(parseMessage(encodePing(0xfedcba9876543210n))).toEqual({ type: MsgType.Ping, nonce: 0xfedcba9876543210n });
    expect(parseMessage(encodePong(1n))).toEqual({ type: MsgType.Pong, nonce: 1n });
    expect(parseMessage(encodeResync())).toEqual({ type: MsgType.Resync });
    for (const id of [1, 127, 128, 300, 2 ** 28, 0xffffffff]) {
      const m = parseMessage(encodeRPC(makeId(3, 1), id, Uint8Array.of(5, 6)));
      expect(m).toEqual({ type: MsgType.RPC, entity: makeId(3, 1), rpc: id, args: Uint8Array.of(5, 6) });
    }
  });

  test("RPC header bytes: 07, entity little-endian, minimal LEB128", () => {
    expect([...encodeRPC(0x01020304, 300, new Uint8Array(0))]).toEqual([7, 4, 3, 2, 1, 0xac, 0x02]);
  });

  test("a HELLO of another version is read no further than the version", () => {
    const w = new BitWriter();
    w.u(3, 0);
    w.bits(0xfff, 12); // whatever version 3 had
    expect(parseMessage(Uint8Array.from([1, ...w.finish()]))).toEqual({ type: MsgType.Hello, version: 3 });
  });

  test("rejections", () => {
    rejects(new Uint8Array(0), /empty/);
    rejects(Uint8Array.of(9), /unknown type/);
    rejects(Uint8Array.of(0), /unknown type/);
    rejects(Uint8Array.of(8, 0), /RESYNC/);
    rejects(Uint8Array.from([...encodePing(1n), 0]), /trailing/);
    rejects(encodePing(1n).subarray(0, 5));
    rejects(encodeRefuse({ code: 70000, message: "" }), /close code/);
    rejects(encodeTick({ tick: 1n, segments: 17 }), /segments/);
    rejects(encodeTick({ tick: 1n, segments: 0, levels: [{ id: 1, level: 5 }] }), /level 5/);
    rejects(encodeHello({ descriptor: new Uint8Array(0), limits: {} }).subarray(0, 8));
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0), /RPC ID/); // ID 0
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x81, 0x00), /minimal/);
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10), /range/);
    rejects(Uint8Array.of(7, 1, 0, 0), /RPC/);
    const h = new BitWriter();
    h.u(PROTOCOL_VERSION, 0);
    h.bytes(new Uint8Array(0));
    h.bytes(new Uint8Array(0));
    for (let i = 0; i < 6; i++) h.u(i === 2 ? 0 : 1, 8);
    rejects(Uint8Array.from([1, ...h.finish()]), /out of range/);
  });

  test("random bytes are rejected with the typed error or parsed", () => {
    let s = 1;
    const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
    for (let i = 0; i < 3000; i++) {
      const b = new Uint8Array(1 + (rnd() % 24));
      for (let j = 0; j < b.length; j++) b[j] = rnd();
      b[0] = 1 + (b[0]! % 8);
      try {
        parseMessage(b);
      } catch (e) {
        expect(e).toBeInstanceOf(ReplicaDecodeError);
      }
    }
  });
});

// ---- A fake WebSocket and server ----

class FakeSocket implements WebSocketLike {
  binaryType = "blob";
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  sent: Uint8Array[] = [];
  closedWith: { code: number; reason: string } | undefined;

  constructor(
    readonly url: string,
    private server: FakeServer,
  ) {
    server.sockets.push(this);
    queueMicrotask(() => {
      this.readyState = 1;
      this.onopen?.({});
    });
  }
  send(data: Uint8Array): void {
    this.sent.push(Uint8Array.from(data));
    this.server.receive(this, Uint8Array.from(data));
  }
  close(code = 1000, reason = ""): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.closedWith = { code, reason };
  }
  /** The server sends a message (as an ArrayBuffer, as browsers deliver it). */
  deliver(b: Uint8Array): void {
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    this.onmessage?.({ data: ab });
  }
  /** The server closes. */
  serverClose(code: number, reason: string): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

class FakeServer {
  sockets: FakeSocket[] = [];
  hellos: Hello[] = [];
  constructor(private onHello: (s: FakeSocket, h: Hello) => void) {}
  receive(s: FakeSocket, b: Uint8Array): void {
    const m = parseMessage(b);
    if (m.type === MsgType.Hello) {
      this.hellos.push(m);
      this.onHello(s, m);
    }
  }
  ctor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const server = this;
    return class extends FakeSocket {
      constructor(url: string) {
        super(url, server);
      }
    };
  }
}

function schema(): Schema {
  return new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32))], { id: 1 })]);
}

const welcome = (s: Schema) => encodeWelcome({ version: 5, descriptor: writeDescriptor(s), session: 42n, userId: "alice", tickRate: 20 });

const create = (slot: number, hp: number) =>
  seg().section(1, 1, 1).tree([{ id: 1, k: 8 }]).ids([slot]).gens([0]).s(hp, 8).end();

const tick = (n: bigint, segs: Uint8Array[], extra: { gained?: number[]; lost?: number[] } = {}) =>
  [encodeTick({ tick: n, segments: segs.length, ...extra }), ...segs];

describe("connection", () => {
  test("handshake, ticks with ownership, ping answered, keep-alive, RESYNC resets before the full state", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://test", schema: s, token: "tok", WebSocket: server.ctor(), idleTimeoutMs: 90 });
    const sock = server.sockets[0]!;
    expect(sock.binaryType).toBe("arraybuffer");
    expect(new TextDecoder().decode(server.hellos[0]!.token)).toBe("tok");
    expect(server.hellos[0]!.descriptor).toEqual(writeDescriptor(s));
    expect([c.userId, c.sessionId, c.tickRate]).toEqual(["alice", 42n, 20]);
    const ticks: bigint[] = [];
    c.onTick = (t) => ticks.push(t);
    // Registered before the tick that creates the entities: it sees the reset's destroys.
    const destroyed: number[] = [];
    c.replica.onDestroy("Unit", (e) => destroyed.push(e.id));
    for (const m of tick(1n, [create(1, 5), create(2, 6)], { gained: [makeId(2, 0)] })) sock.deliver(m);
    expect(c.replica.size).toBe(2);
    expect(c.replica.entity(makeId(2, 0))!.owned).toBe(true);
    sock.deliver(encodePing(77n));
    expect(parseMessage(sock.sent.at(-1)!)).toEqual({ type: MsgType.Pong, nonce: 77n });
    // Keep-alive: a PING every third of the idle timeout.
    await new Promise((r) => setTimeout(r, 40));
    expect(sock.sent.some((b) => b[0] === MsgType.Ping)).toBe(true);
    // RESYNC: the next tick is the full state; the replica is reset just before it applies.
    sock.deliver(encodeResync());
    expect(c.replica.size).toBe(2);
    for (const m of tick(9n, [create(3, 1)])) sock.deliver(m);
    expect(destroyed.sort()).toEqual([makeId(1, 0), makeId(2, 0)]);
    expect(c.replica.entities().map((e) => e.id)).toEqual([makeId(3, 0)]);
    expect(ticks).toEqual([1n, 9n]);
    expect(c.lastTick).toBe(9n);
    // A tick with no segments.
    for (const m of tick(10n, [])) sock.deliver(m);
    expect(c.lastTick).toBe(10n);
    c.close();
    expect(sock.closedWith!.code).toBe(4000);
    expect((await c.done()).code).toBe(CloseCode.Normal);
  });

  test("a bad tick keeps the replica and closes with code 2; reconnect starts over with the full state", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor(), refresh: async () => "fresh" });
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5)])) sock.deliver(m);
    const errors: Error[] = [];
    c.onError = (e) => errors.push(e);
    for (const m of tick(2n, [create(2, 1), Uint8Array.of(0xff)])) sock.deliver(m);
    expect(errors[0]).toBeInstanceOf(ReplicaDecodeError);
    expect(c.replica.entities().map((e) => e.id)).toEqual([makeId(1, 0)]);
    expect(sock.closedWith!.code).toBe(4000 + CloseCode.ProtocolError);
    expect((await c.done()).code).toBe(CloseCode.ProtocolError);
    await c.reconnect();
    expect(new TextDecoder().decode(server.hellos[1]!.token)).toBe("fresh");
    expect(c.replica.size).toBe(0);
    const sock2 = server.sockets[1]!;
    for (const m of tick(1n, [create(4, 2)])) sock2.deliver(m);
    expect(c.replica.entities().map((e) => e.id)).toEqual([makeId(4, 0)]);
    c.close();
  });

  test("a callback that throws does not reject its tick", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    const errors: Error[] = [];
    c.onError = (e) => errors.push(e);
    c.replica.onCreate("Unit", () => {
      throw new Error("boom");
    });
    for (const m of tick(1n, [create(1, 5)])) server.sockets[0]!.deliver(m);
    for (const m of tick(2n, [create(2, 5)])) server.sockets[0]!.deliver(m);
    expect(errors.map((e) => e.message)).toEqual(["boom", "boom"]);
    expect([c.replica.size, c.lastTick, server.sockets[0]!.closedWith]).toEqual([2, 2n, undefined]);
    c.close();
  });

  test("REFUSE rejects with the code and message; so does a close during the handshake", async () => {
    const s = schema();
    const refusing = new FakeServer((sock) => sock.deliver(encodeRefuse({ code: CloseCode.AuthFailed, message: "invalid token" })));
    await expect(Connection.connect({ url: "ws://x", schema: s, WebSocket: refusing.ctor() })).rejects.toEqual(new RefusedError(7, "invalid token"));
    const closing = new FakeServer((sock) => sock.serverClose(4012, "busy"));
    const err = await Connection.connect({ url: "ws://x", schema: s, WebSocket: closing.ctor() }).catch((e) => e);
    expect(err).toBeInstanceOf(RefusedError);
    expect([err.code, err.reason]).toEqual([12, "busy"]);
    const silent = new FakeServer(() => {});
    const t = await Connection.connect({ url: "ws://x", schema: s, WebSocket: silent.ctor(), handshakeTimeoutMs: 20 }).catch((e) => e);
    expect(t.code).toBe(CloseCode.HandshakeTimeout);
    const incompatible = new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int32))], { id: 1 })]);
    const other = new FakeServer((sock) => sock.deliver(welcome(incompatible)));
    await expect(Connection.connect({ url: "ws://x", schema: s, WebSocket: other.ctor() })).rejects.toThrow(/incompatible/);
  });

  test("an idle server is closed with code 5", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor(), idleTimeoutMs: 30 });
    const closed = await c.done();
    expect(closed.code).toBe(CloseCode.IdleTimeout);
    expect(server.sockets[0]!.closedWith!.code).toBe(4005);
  });

  test("server RPCs reach their handlers with decoded arguments", async () => {
    const args = struct("Say", [field(1, "text", ty(Kind.String)), field(2, "n", ty(Kind.Uint8))]);
    const unit = struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 });
    const jump = struct("Jump", [field(1, "h", ty(Kind.Uint8))]);
    unit.rpcs = [{ id: 2, name: "jump", dir: 0, args: jump }, { id: 3, name: "say", dir: 1, args }];
    const s = new Schema([unit]);
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor() });
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5)])) sock.deliver(m);
    const got: unknown[] = [];
    c.handleRPC("Unit", 3, (e, a) => got.push([e.id, a.get("text"), a.get("n")]));
    const rec = new BitWriter();
    rec.u(2, 2); // tree: two fields
    rec.u(0, 2); // field 1, a string: no k
    rec.u(0, 2); // field 2, uint8
    rec.bits(8, 6); // its k
    rec.string("hi");
    rec.u(200, 8);
    sock.deliver(encodeRPC(makeId(1, 0), 3, rec.finish()));
    sock.deliver(encodeRPC(makeId(9, 0), 3, rec.finish())); // no such entity: dropped
    expect(got).toEqual([[makeId(1, 0), "hi", 200]]);
    c.sendRPC(makeId(1, 0), 2, Uint8Array.of(0));
    expect([...sock.sent.at(-1)!]).toEqual([7, 1, 0, 0, 0, 2, 0]);
    c.callRPC(makeId(1, 0), "jump", { h: 3 });
    const m = parseMessage(sock.sent.at(-1)!) as RPC;
    expect([m.entity, m.rpc]).toEqual([makeId(1, 0), 2]);
    expect(c.replica.decoder.decodeRecord(jump, jump, m.args).get("h")).toBe(3);
    expect(() => c.callRPC(makeId(1, 0), "say")).toThrow(/no client RPC/);
    c.close();
  });
});

// ---- A fake WebTransport session and server ----

/** A WebTransport session as a browser has it, the server's side driven by the test. */
class FakeWT {
  ready: Promise<void>;
  closed: Promise<{ closeCode?: number; reason?: string }>;
  closedWith: { closeCode?: number; reason?: string } | undefined;
  /** Bytes the client wrote on its stream, and the messages in them after the preamble. */
  written: Uint8Array[] = [];
  received: Uint8Array[] = [];
  /** The client ended its side of the stream. */
  clientEnded = false;
  private toClient!: ReadableStreamDefaultController<Uint8Array>;
  private resolveClosed!: (i: { closeCode?: number; reason?: string }) => void;
  private frames = new FrameReader(1 << 20);
  private preamble = new Uint8Array(0);

  constructor(
    readonly url: string,
    readonly options: WebTransportOptionsLike | undefined,
    private readonly server: FakeWTServer,
  ) {
    server.sessions.push(this);
    this.ready = server.fail ? Promise.reject(new Error("WebTransport connection rejected")) : Promise.resolve();
    this.ready.catch(() => {});
    this.closed = new Promise((res) => (this.resolveClosed = res));
  }

  async createBidirectionalStream() {
    const readable = new ReadableStream<Uint8Array>({ start: (c) => void (this.toClient = c) });
    const writable = new WritableStream<Uint8Array>({
      write: (chunk) => this.write(Uint8Array.from(chunk)),
      close: () => void (this.clientEnded = true),
    });
    return { readable, writable };
  }

  private write(b: Uint8Array): void {
    this.written.push(b);
    let rest = b;
    if (this.preamble.length < 4) {
      const n = Math.min(4 - this.preamble.length, b.length);
      this.preamble = Uint8Array.from([...this.preamble, ...b.subarray(0, n)]);
      rest = b.subarray(n);
    }
    for (const m of this.frames.push(rest)) {
      const msg = Uint8Array.from(m);
      this.received.push(msg);
      this.server.receive(this, msg);
    }
  }

  close(info?: { closeCode?: number; reason?: string }): void {
    if (this.closedWith) return;
    this.closedWith = info ?? {};
    this.resolveClosed(this.closedWith);
    try {
      this.toClient.error(new Error("session closed"));
    } catch {
      // already closed
    }
  }

  /** The server sends messages, as frames, cut into chunks of chunk bytes. */
  deliver(chunk: number, ...msgs: Uint8Array[]): void {
    const b = Uint8Array.from(msgs.flatMap((m) => [...frame(m)]));
    for (let i = 0; i < b.length; i += chunk) this.toClient.enqueue(b.slice(i, i + chunk));
  }

  /** The server ends the stream and closes the session with a code. */
  serverClose(closeCode: number, reason: string): void {
    this.serverEnd();
    this.closeSession(closeCode, reason);
  }

  /** The server ends its side of the stream (FIN). */
  serverEnd(): void {
    this.toClient.close();
  }

  /** The server closes the session with a code (CLOSE_WEBTRANSPORT_SESSION). */
  closeSession(closeCode: number, reason: string): void {
    this.closedWith = { closeCode, reason };
    this.resolveClosed({ closeCode, reason });
  }
}

class FakeWTServer {
  sessions: FakeWT[] = [];
  fail = false;
  constructor(private onHello: (s: FakeWT, h: Hello) => void) {}
  receive(s: FakeWT, b: Uint8Array): void {
    const m = parseMessage(b);
    if (m.type === MsgType.Hello) this.onHello(s, m);
  }
  ctor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const server = this;
    return class extends FakeWT {
      constructor(url: string, options?: WebTransportOptionsLike) {
        super(url, options, server);
      }
    };
  }
}

const settle = () => new Promise((r) => setTimeout(r, 5));

describe("connection over WebTransport", () => {
  test("preamble, frames in any chunking, hashes, ping answered, close code in the session close", async () => {
    const s = schema();
    const server = new FakeWTServer((wt) => wt.deliver(3, welcome(s)));
    const hash = Uint8Array.from({ length: 32 }, (_, i) => i);
    const c = await Connection.connect({
      webTransportUrl: "https://127.0.0.1:4433/replica", certificateHashes: async () => [hash], schema: s, token: "tok",
      transport: "webtransport", WebTransport: server.ctor(),
    });
    expect(c.transport).toBe("webtransport");
    const wt = server.sessions[0]!;
    expect(wt.url).toBe("https://127.0.0.1:4433/replica");
    expect(wt.options).toEqual({ serverCertificateHashes: [{ algorithm: "sha-256", value: hash }] });
    expect([...wt.written[0]!]).toEqual([...PREAMBLE]);
    expect(new TextDecoder().decode((parseMessage(wt.received[0]!) as Hello).token)).toBe("tok");
    const ticks: bigint[] = [];
    c.onTick = (t) => ticks.push(t);
    wt.deliver(1, ...tick(1n, [create(1, 5), create(2, 6)], { gained: [makeId(2, 0)] }));
    wt.deliver(1000, ...tick(2n, []), encodePing(5n));
    await settle();
    expect(ticks).toEqual([1n, 2n]);
    expect(c.replica.size).toBe(2);
    expect(c.bytesReceived).toBeGreaterThan(20);
    expect(parseMessage(wt.received.at(-1)!)).toEqual({ type: MsgType.Pong, nonce: 5n });
    c.close(CloseCode.Normal, "bye");
    expect(wt.closedWith).toEqual({ closeCode: 0, reason: "bye" });
    expect((await c.done()).code).toBe(CloseCode.Normal);
  });

  test("the server's session close ends the connection with its code, after the messages before it", async () => {
    const s = schema();
    const server = new FakeWTServer((wt) => wt.deliver(64, welcome(s)));
    const c = await Connection.connect({ webTransportUrl: "https://x/replica", schema: s, WebTransport: server.ctor() });
    const wt = server.sessions[0]!;
    wt.deliver(64, ...tick(1n, [create(1, 5)]));
    wt.serverClose(CloseCode.Replaced, "replaced by a newer session");
    const closed = await c.done();
    expect([closed.code, closed.reason]).toEqual([CloseCode.Replaced, "replaced by a newer session"]);
    expect(c.lastTick).toBe(1n);
  });

  test("a client whose stream the server ended ends its own, then takes the session's close code", async () => {
    const s = schema();
    const server = new FakeWTServer((wt) => wt.deliver(64, welcome(s)));
    const c = await Connection.connect({ webTransportUrl: "https://x/replica", schema: s, WebTransport: server.ctor() });
    const wt = server.sessions[0]!;
    wt.deliver(64, ...tick(1n, []));
    wt.serverEnd();
    await settle();
    expect(wt.clientEnded).toBe(true);
    wt.closeSession(CloseCode.GoingAway, "server shutting down");
    const closed = await c.done();
    expect([closed.code, closed.reason]).toEqual([CloseCode.GoingAway, "server shutting down"]);
    expect(c.lastTick).toBe(1n);
  });

  test("a REFUSE over WebTransport rejects without falling back to WebSocket", async () => {
    const s = schema();
    const server = new FakeWTServer((wt) => {
      wt.deliver(64, encodeRefuse({ code: CloseCode.AuthFailed, message: "invalid token" }));
      wt.serverClose(CloseCode.AuthFailed, "invalid token");
    });
    const ws = new FakeServer((sock) => sock.deliver(welcome(s)));
    const opts = { url: "ws://x", webTransportUrl: "https://x/replica", schema: s, WebTransport: server.ctor(), WebSocket: ws.ctor() };
    await expect(Connection.connect(opts)).rejects.toEqual(new RefusedError(7, "invalid token"));
    expect(ws.sockets).toHaveLength(0);
  });

  test("auto mode falls back to WebSocket when WebTransport fails to connect; forced modes do not", async () => {
    const s = schema();
    const wts = new FakeWTServer(() => {});
    wts.fail = true;
    const ws = new FakeServer((sock) => sock.deliver(welcome(s)));
    const opts = { url: "ws://x", webTransportUrl: "https://x/replica", schema: s, WebTransport: wts.ctor(), WebSocket: ws.ctor() };
    const c = await Connection.connect(opts);
    expect(c.transport).toBe("websocket");
    expect([wts.sessions.length, ws.sockets.length]).toEqual([1, 1]);
    c.close();
    const err = await Connection.connect({ ...opts, transport: "webtransport" }).catch((e) => e);
    expect(err.code).toBe(CloseCode.Network);
    expect(ws.sockets).toHaveLength(1);
    // Forced WebSocket never tries WebTransport; nor does auto without a WebTransport URL.
    const w = await Connection.connect({ ...opts, transport: "websocket" });
    const a = await Connection.connect({ ...opts, webTransportUrl: undefined });
    expect([w.transport, a.transport, wts.sessions.length]).toEqual(["websocket", "websocket", 2]);
    w.close();
    a.close();
  });

  test("a frame over the limit closes with code 3", async () => {
    const s = schema();
    const server = new FakeWTServer((wt) => wt.deliver(64, welcome(s)));
    const c = await Connection.connect({ webTransportUrl: "https://x/replica", schema: s, WebTransport: server.ctor(), maxMessageBytes: 1000 });
    server.sessions[0]!.deliver(64, new Uint8Array(1001));
    const closed = await c.done();
    expect(closed.code).toBe(CloseCode.MessageTooLarge);
    expect(server.sessions[0]!.closedWith!.closeCode).toBe(CloseCode.MessageTooLarge);
  });
});
