// Session messages (docs/protocol.md §10.2) and the WebSocket connection
// (§10.3, §10.4) against an in-process fake server.
import { describe, expect, test } from "vitest";
import { decodeDescriptor, writeDescriptor } from "../src/descriptor.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { ClosedError, Connection, CloseCode, RefusedError } from "../src/connection.js";
import { FrameReader, PREAMBLE, frame, type WebSocketLike, type WebTransportOptionsLike } from "../src/transport.js";
import { DEFAULT_LIMITS, type Limits } from "../src/decoder.js";
import { PROTOCOL_VERSION, encodeHello, encodePing, encodePong, encodeRPC, type Hello, type RPC } from "../src/session.js";
import { MsgType, encodeRefuse, encodeResync, encodeTick, encodeWelcome, parseAny as parseMessage, parseHello } from "../src/peer.js";
import { Kind, Schema } from "../src/schema.js";
import { makeId } from "../src/state.js";
import { Replica } from "../src/replica.js";
import { BitWriter } from "../src/bits.js";
import { field, struct, ty } from "./schemas.js";
import { tohex, unhex } from "./helpers.js";
import { readFileSync } from "node:fs";
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
    expect(h).toEqual({ type: MsgType.Hello, version: 7, descriptor: desc, token: Uint8Array.of(9), limits: { ...DEFAULT_LIMITS, maxDepth: 8 } });
    expect("resume" in h).toBe(false);
    const resume = {
      ticket: [2n ** 64n - 1n, 0x0123456789abcdefn] as const, tick: 2n ** 40n + 3n,
      held: [{ slot: 0, generation: 0, level: 0, owned: false }, { slot: 1, generation: 255, level: 4, owned: true }, { slot: 2 ** 24 - 1, generation: 7, level: 1, owned: false }],
    };
    const hr = parseMessage(encodeHello({ descriptor: desc, resume })) as Hello;
    expect(hr.resume).toEqual(resume);
    const w = { version: 7, descriptor: desc, session: 2n ** 64n - 1n, userId: "ünï", tickRate: 30, ticket: [1n, 2n ** 63n] as const, resumed: true, maxMessage: 2 ** 31 - 1 };
    expect(parseMessage(encodeWelcome(w))).toEqual({ type: MsgType.Welcome, ...w });
    expect(parseMessage(encodeWelcome({ ...w, ticket: undefined, resumed: undefined, maxMessage: undefined }))).toEqual({ type: MsgType.Welcome, ...w, ticket: [0n, 0n], resumed: false, maxMessage: 0 });
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

  test("HELLO's resume block and WELCOME's ticket, bit by bit as §1 and §10.5 spell them", () => {
    // Bits in stream order (§1.1), spaces for reading only; padded with 0 bits.
    const pack = (type: number, bits: string): Uint8Array => {
      const b = bits.replace(/ /g, "");
      const out = new Uint8Array(1 + Math.ceil(b.length / 8));
      out[0] = type;
      for (let q = 0; q < b.length; q++) if (b[q] === "1") out[1 + (q >> 3)]! |= 1 << (q & 7);
      return out;
    };
    const z = (n: number): string => "0".repeat(n);
    const hello = pack(1, [
      "111 0 11", // U(0) version 7: three 1s, 0, bits(2) = 6 mod 4
      "0 0000", // bytes: no descriptor
      "0 0000", // bytes: no token
      ..."123456".split("").map(() => "0 10000000"), // six limits, U(8) 1
      "1", // resume
      "1" + z(63), // ticket, first bits(64): 1
      z(63) + "1", // second: 2^63
      "1 0 00110100", // U(8) T = 300: one 1, 0, bits(8) = 44
      "0 010", // U(3) n = 2
      "0 11", "10100000", "11 0 0", "1", // slot 3 (gap 3), generation 5, level 2, owned
      "1 0 10", "11111111", "0", "0", // slot 9 (gap 5), generation 255, level 0, not owned
    ].join(""));
    const limits = { maxSegmentBytes: 1, maxStringBytes: 1, maxContainerLen: 1, maxDepth: 1, maxEntities: 1, maxValues: 1 };
    const resume = {
      ticket: [1n, 2n ** 63n] as const, tick: 300n,
      held: [{ slot: 3, generation: 5, level: 2, owned: true }, { slot: 9, generation: 255, level: 0, owned: false }],
    };
    expect(tohex(encodeHello({ descriptor: new Uint8Array(0), limits, resume }))).toBe(tohex(hello));
    expect(parseMessage(hello)).toEqual({ type: MsgType.Hello, version: 7, descriptor: new Uint8Array(0), token: new Uint8Array(0), limits, resume });
    const welcome = pack(2, [
      "111 0 11", // U(0) version 7
      "0 1000", "11010101", // bytes: one byte, 0xAB
      "0 11100000", // U(8) session 7
      "0 1000", "10000110", // string "a"
      "1 0 0010", // U(4) tick rate 20
      "11" + z(62), // ticket: 3
      z(32) + "1" + z(31), // 2^32
      "1", // resumed
      "0 00001000", // U(8) max message 16
    ].join(""));
    const w = { version: 7, descriptor: Uint8Array.of(0xab), session: 7n, userId: "a", tickRate: 20, ticket: [3n, 2n ** 32n] as const, resumed: true, maxMessage: 16 };
    expect(tohex(encodeWelcome(w))).toBe(tohex(welcome));
    expect(parseMessage(welcome)).toEqual({ type: MsgType.Welcome, ...w });
  });

  test("Go's HELLOs and WELCOMEs (testdata/session-v7.json): encoded to the same bytes, parsed to the same fields", () => {
    const v = JSON.parse(readFileSync(new URL("./testdata/session-v7.json", import.meta.url), "utf8")) as {
      hellos: { comment: string; descriptor: string; token: string; limits: Limits; bytes: string;
        resume?: { ticket: [string, string]; tick: string; held: { id: number; level: number; owned: boolean }[] } }[];
      welcomes: { comment: string; descriptor: string; session: string; userId: string; tickRate: number; ticket: [string, string]; resumed: boolean; maxMessage: number; bytes: string }[];
    };
    expect(v.hellos.filter((h) => h.resume && h.resume.held.length > 0)).not.toHaveLength(0);
    for (const h of v.hellos) {
      const r = h.resume;
      const resume = r && {
        ticket: [BigInt(r.ticket[0]), BigInt(r.ticket[1])] as const, tick: BigInt(r.tick),
        held: r.held.map((e) => ({ slot: e.id & 0xffffff, generation: e.id >>> 24, level: e.level, owned: e.owned })),
      };
      const m = { descriptor: unhex(h.descriptor), token: unhex(h.token), limits: h.limits, resume };
      expect(tohex(encodeHello(m)), h.comment).toBe(h.bytes);
      const got = parseHello(unhex(h.bytes));
      expect(got, h.comment).toEqual({ type: MsgType.Hello, version: 7, ...m });
      expect("resume" in got, h.comment).toBe(r !== undefined);
    }
    for (const w of v.welcomes) {
      const m = {
        version: 7, descriptor: unhex(w.descriptor), session: BigInt(w.session), userId: w.userId, tickRate: w.tickRate,
        ticket: [BigInt(w.ticket[0]), BigInt(w.ticket[1])] as const, resumed: w.resumed, maxMessage: w.maxMessage,
      };
      expect(tohex(encodeWelcome(m)), w.comment).toBe(w.bytes);
      expect(parseMessage(unhex(w.bytes)), w.comment).toEqual({ type: MsgType.Welcome, ...m });
    }
  });

  test("resume blocks out of §10.5's bounds: rejected when parsed, refused when encoded", () => {
    const hello = (resume: (w: BitWriter) => void): Uint8Array => {
      const w = new BitWriter();
      w.u(PROTOCOL_VERSION, 0);
      w.bytes(new Uint8Array(0));
      w.bytes(new Uint8Array(0));
      for (let i = 0; i < 6; i++) w.u(1, 8);
      w.bool(true);
      w.bitsWide(1, 0, 64);
      w.bitsWide(0, 0, 64);
      w.u(5, 8);
      resume(w);
      return Uint8Array.from([1, ...w.finish()]);
    };
    const entry = (w: BitWriter, gap: number, level = 0, gapHi = 0) => {
      w.u(gap, 2, gapHi);
      w.bits(1, 8);
      w.u(level, 0);
      w.bool(false);
    };
    rejects(hello((w) => w.u(8193, 3)), /resume entities 8193 > 8192/);
    rejects(hello((w) => w.u(3, 3)), /truncated: resume entities 3/);
    rejects(hello((w) => (w.u(1, 3), entry(w, 2 ** 24))), /slot out of range/);
    rejects(hello((w) => (w.u(2, 3), entry(w, 2 ** 24 - 1), entry(w, 0))), /slot out of range/);
    rejects(hello((w) => (w.u(1, 3), entry(w, 0, 0, 1))), /slot out of range/);
    rejects(hello((w) => (w.u(1, 3), entry(w, 0, 5))), /level 5/);
    rejects(hello((w) => (w.u(1, 3), entry(w, 0), w.bits(0, 8))), /trailing/);
    // The largest block parses.
    const big = hello((w) => {
      w.u(8192, 3);
      for (let i = 0; i < 8192; i++) entry(w, 0, 4);
    });
    expect((parseMessage(big) as Hello).resume!.held).toHaveLength(8192);
    // A WELCOME cut inside its ticket.
    const wel = encodeWelcome({ version: 7, descriptor: new Uint8Array(0), session: 1n, userId: "", tickRate: 1, ticket: [1n, 1n] });
    rejects(wel.subarray(0, wel.length - 3), /ends early/);
    const e = (slot: number, level = 0) => ({ slot, generation: 0, level, owned: false });
    const enc = (held: ReturnType<typeof e>[]) => () => encodeHello({ descriptor: new Uint8Array(0), resume: { ticket: [1n, 0n], tick: 0n, held } });
    expect(enc([e(1), e(1)])).toThrow(RangeError);
    expect(enc([e(2 ** 24)])).toThrow(RangeError);
    expect(enc([e(0, 5)])).toThrow(RangeError);
    expect(enc(Array.from({ length: 8193 }, (_, i) => e(i)))).toThrow(RangeError);
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
    rejects(Uint8Array.of(8, 0), /type 8: malformed: trailing/);
    rejects(Uint8Array.from([...encodePing(1n), 0]), /trailing/);
    rejects(encodePing(1n).subarray(0, 5));
    rejects(encodeRefuse({ code: 70000, message: "" }), /close code/);
    rejects(encodeTick({ tick: 1n, segments: 17 }), /segments/);
    rejects(encodeTick({ tick: 1n, segments: 0, levels: [{ id: 1, level: 5 }] }), /level 5/);
    rejects(encodeHello({ descriptor: new Uint8Array(0), limits: {} }).subarray(0, 8));
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0), /RPC ID/); // ID 0
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x81, 0x00), /minimal/);
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10), /range/);
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01), /RPC ID too long/);
    rejects(Uint8Array.of(7, 1, 0, 0, 0, 0x81, 0x81), /RPC ID cut short/);
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
      if (server.refuse) {
        // Failed to connect: an error, then (browsers) a close or (Node 20) none.
        this.readyState = 3;
        this.onerror?.({});
        if (server.refuse === "error, close") this.onclose?.({ code: 1006, reason: "" });
        return;
      }
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
  /** Whether its sockets fail to connect instead of opening, and how. */
  refuse?: "error" | "error, close";
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

/** A schema as a client has it: decoded from its descriptor, which the HELLO carries. */
const decoded = (s: Schema): Schema => decodeDescriptor(writeDescriptor(s));

function schema(): Schema {
  return decoded(new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32))], { id: 1 })]));
}

const welcome = (s: Schema, extra: { ticket?: readonly [bigint, bigint]; resumed?: boolean; maxMessage?: number } = {}) =>
  encodeWelcome({ version: PROTOCOL_VERSION, descriptor: writeDescriptor(s), session: 42n, userId: "alice", tickRate: 20, ...extra });

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

  test("ticks that come with the WELCOME apply after connect resolves: callbacks registered then see the first state", async () => {
    const s = schema();
    const server = new FakeServer((sock) => {
      // The WELCOME, the full state and a close, in one batch: all before connect resolves.
      sock.deliver(welcome(s));
      for (const m of tick(1n, [create(1, 5), create(2, 6)])) sock.deliver(m);
      sock.serverClose(4000 + CloseCode.GoingAway, "bye");
    });
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    const seen: string[] = [];
    c.replica.onCreate("Unit", (e) => seen.push(`create ${e.slot}`));
    c.replica.onField("Unit", "hp", (e, old, now) => seen.push(`hp ${e.slot} ${old}→${now}`));
    c.onClose = (e) => seen.push(`close ${e.code}`);
    expect([c.replica.size, c.lastTick]).toEqual([0, 0n]);
    await new Promise((r) => setTimeout(r, 0));
    expect(seen).toEqual(["create 1", "hp 1 0→5", "create 2", "hp 2 0→6", "close 1"]);
    expect([c.replica.size, c.lastTick]).toEqual([2, 1n]);
  });

  test("a connection lost after it opened (WebSocket status 1006, no reason) closes with −1 and a reason naming the status", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    server.sockets[0]!.serverClose(1006, "");
    const closed = await c.done();
    expect([closed.code, closed.reason]).toEqual([-1, "WebSocket closed with status 1006"]);
  });

  test("a bad tick keeps the replica and closes with code 2; reconnect starts over with the full state, not resumed", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s, { ticket: [1n, 2n] })));
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
    expect(server.hellos[1]!.resume).toBeUndefined(); // the replica the server's ticks no longer fit is not declared
    expect(c.replica.size).toBe(0);
    const sock2 = server.sockets[1]!;
    for (const m of tick(1n, [create(4, 2)])) sock2.deliver(m);
    expect(c.replica.entities().map((e) => e.id)).toEqual([makeId(4, 0)]);
    c.close();
  });

  test("reconnect resumes: the HELLO declares the replica, a resumed WELCOME keeps it, the catch-up tick applies to it", async () => {
    // Unit with a level-of-detail band: field 3 in band 1 (within 50 units).
    const s = decoded(new Schema([
      struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32)), field(3, "gear", ty(Kind.Uint8), { band: 1 })], { id: 1, distances: [50] }),
    ]));
    const answers: { ticket: readonly [bigint, bigint]; resumed?: boolean }[] = [{ ticket: [5n, 6n] }, { ticket: [7n, 8n], resumed: true }, { ticket: [9n, 1n] }];
    const server = new FakeServer((sock) => sock.deliver(welcome(s, answers.shift())));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    expect(server.hellos[0]!.resume).toBeUndefined();
    expect(c.resumed).toBe(false);
    for (const m of tick(1n, [create(1, 5), create(2, 6)], { gained: [makeId(2, 0)] })) server.sockets[0]!.deliver(m);
    for (const m of [encodeTick({ tick: 2n, segments: 0, levels: [{ id: makeId(1, 0), level: 0 }] })]) server.sockets[0]!.deliver(m);
    const events: string[] = [];
    c.replica.onCreate("Unit", (e) => events.push(`create ${e.slot}`));
    c.replica.onDestroy("Unit", (e) => events.push(`destroy ${e.slot}`));
    c.replica.onField("Unit", "hp", (e, old, now) => events.push(`hp ${e.slot} ${old}→${now}`));
    server.sockets[0]!.serverClose(4000 + CloseCode.Network, "lost");
    await c.reconnect();
    expect(server.hellos[1]!.resume).toEqual({
      ticket: [5n, 6n], tick: 2n,
      held: [{ slot: 1, generation: 0, level: 0, owned: false }, { slot: 2, generation: 0, level: 1, owned: true }],
    });
    expect([c.resumed, c.lastTick, c.replica.size, events]).toEqual([true, 2n, 2, []]);
    // The catch-up: slot 2's hp changed (a set section, full mode), slot 1 left, slot 3 came.
    const catchUp = seg().section(5, 1, 1).tree([{ id: 1, k: 8 }]).ids([2]).s(9, 8)
      .destroy([1]).section(1, 1, 1).tree([{ id: 1, k: 8 }]).ids([3]).gens([0]).s(4, 8).end();
    const sock2 = server.sockets[1]!;
    for (const m of tick(10n, [catchUp])) sock2.deliver(m);
    expect(events).toEqual(["hp 2 6→9", "destroy 1", "create 3", "hp 3 0→4"]);
    expect(c.lastTick).toBe(10n);
    expect(c.replica.entities().map((e) => [e.slot, e.get("hp"), e.owned, e.level])).toEqual([[2, 9, true, 1], [3, 4, false, 1]]);
    // Updates after it apply as usual; a RESYNC still resets before the full state.
    for (const m of tick(11n, [seg().section(2, 1, 1).tree([{ id: 1, k: 8 }]).ids([3]).s(1, 8).end()])) sock2.deliver(m);
    expect(c.replica.entity(makeId(3, 0))!.get("hp")).toBe(5);
    sock2.deliver(encodeResync());
    for (const m of tick(12n, [create(3, 5)])) sock2.deliver(m);
    expect(c.replica.entities().map((e) => e.slot)).toEqual([3]);
    // A server that does not resume (resumed = 0): the replica starts over.
    events.length = 0;
    await c.reconnect();
    expect(server.hellos[2]!.resume).toEqual({ ticket: [7n, 8n], tick: 12n, held: [{ slot: 3, generation: 0, level: 1, owned: false }] });
    expect([c.resumed, c.lastTick, c.replica.size, events]).toEqual([false, 0n, 0, ["destroy 3"]]);
    for (const m of tick(13n, [create(4, 1)])) server.sockets[2]!.deliver(m);
    expect(c.replica.entities().map((e) => e.slot)).toEqual([4]);
    c.close();
  });

  test("a resumed WELCOME with another descriptor, or one not asked for, closes with code 2", async () => {
    const s = schema();
    const other = new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32)), field(3, "y", ty(Kind.Float32))], { id: 1 })]);
    const answers = [welcome(s, { ticket: [1n, 1n] }), welcome(other, { ticket: [2n, 2n], resumed: true }), welcome(other, { ticket: [3n, 3n] })];
    const server = new FakeServer((sock) => sock.deliver(answers.shift()!));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    for (const m of tick(1n, [create(1, 5)])) server.sockets[0]!.deliver(m);
    const err = await c.reconnect().catch((e) => e);
    expect(err).toBeInstanceOf(ReplicaDecodeError);
    expect(err.message).toMatch(/another descriptor/);
    expect(server.hellos[1]!.resume!.ticket).toEqual([1n, 1n]);
    expect(server.sockets[1]!.closedWith!.code).toBe(4000 + CloseCode.ProtocolError);
    expect([c.replica.size, c.lastTick]).toEqual([1, 1n]);
    // The next reconnect does not offer that ticket: the replica starts over.
    await c.reconnect();
    expect(server.hellos[2]!.resume).toBeUndefined();
    expect([c.resumed, c.replica.size, c.replica.remote.class(1)!.fields.length]).toEqual([false, 0, 3]);
    c.close();
    // A first connect is never resumed.
    const eager = new FakeServer((sock) => sock.deliver(welcome(s, { ticket: [1n, 1n], resumed: true })));
    const e2 = await Connection.connect({ url: "ws://test", schema: s, WebSocket: eager.ctor() }).catch((e) => e);
    expect(e2.message).toMatch(/did not ask to resume/);
    expect(eager.sockets[0]!.closedWith!.code).toBe(4000 + CloseCode.ProtocolError);
  });

  test("a session none of whose ticks was applied does not ask to resume", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s, { ticket: [1n, 1n] })));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    await c.reconnect();
    expect(server.hellos[1]!.resume).toBeUndefined();
    for (const m of tick(4n, [create(1, 5)])) server.sockets[1]!.deliver(m);
    await c.reconnect();
    expect(server.hellos[2]!.resume).toEqual({ ticket: [1n, 1n], tick: 4n, held: [{ slot: 1, generation: 0, level: 0, owned: false }] });
    c.close();
  });

  test("a replica of more than 8,192 entities does not ask to resume", async () => {
    const s = schema();
    const server = new FakeServer((sock) => sock.deliver(welcome(s, { ticket: [1n, 1n] })));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    const many = (n: number) => {
      const slots = Array.from({ length: n }, (_, i) => i);
      const g = seg().section(1, 1, 1).tree([]).ids(slots);
      return g.gens(slots.map(() => 0)).end();
    };
    for (const m of tick(1n, [many(8193)])) server.sockets[0]!.deliver(m);
    expect(c.replica.size).toBe(8193);
    await c.reconnect();
    expect(server.hellos[1]!.resume).toBeUndefined();
    for (const m of tick(1n, [many(8192)])) server.sockets[1]!.deliver(m);
    await c.reconnect();
    expect(server.hellos[2]!.resume!.held).toHaveLength(8192);
    c.close();
  });

  test("a callback that throws does not reject its tick nor stop the others; each error reaches onError, named", async () => {
    const spec = struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 });
    spec.rpcs = [{ id: 3, name: "say", dir: 1, args: struct("Say", []) }];
    const s = decoded(new Schema([spec]));
    const unit = s.lookup("Unit")!;
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://test", schema: s, WebSocket: server.ctor() });
    const errors: unknown[] = [];
    c.onError = (e, where) => errors.push([e.message, where]);
    c.replica.onCreate("Unit", () => {
      throw new Error("boom");
    });
    const created: number[] = [];
    c.replica.onCreate("Unit", (e) => created.push(e.slot));
    c.onTick = (t) => {
      if (t === 2n) throw new Error("tick");
    };
    const said: number[] = [];
    c.handleRPC(unit, 3, () => {
      throw new Error("rpc");
    });
    c.handleRPC(unit, 3, (e) => said.push(e.slot));
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5)])) sock.deliver(m);
    for (const m of tick(2n, [create(2, 5)])) sock.deliver(m);
    sock.deliver(encodeRPC(makeId(2, 0), 3, Uint8Array.of(0)));
    expect(errors).toEqual([
      ["boom", "onCreate(Unit)"],
      ["boom", "onCreate(Unit)"],
      ["tick", "onTick"],
      ["rpc", "handleRPC(Unit, 3)"],
    ]);
    expect([created, said]).toEqual([[1, 2], [2]]);
    expect([c.replica.size, c.lastTick, sock.closedWith]).toEqual([2, 2n, undefined]);
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
    const bare = new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 })]);
    await expect(Connection.connect({ url: "ws://x", schema: bare, WebSocket: silent.ctor() })).rejects.toThrow(/not decoded from a descriptor/);
    const incompatible = new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int32))], { id: 1 })]);
    const other = new FakeServer((sock) => sock.deliver(welcome(incompatible)));
    await expect(Connection.connect({ url: "ws://x", schema: s, WebSocket: other.ctor() })).rejects.toThrow(/incompatible/);
  });

  test("a WebSocket that fails before it opens rejects at once with code 11, whether it then closes (browsers) or not (Node 20)", async () => {
    const s = schema();
    for (const how of ["error", "error, close"] as const) {
      const down = new FakeServer(() => {});
      down.refuse = how;
      const t0 = Date.now();
      const err = await Connection.connect({ url: "ws://127.0.0.1:1/", schema: s, WebSocket: down.ctor(), handshakeTimeoutMs: 60_000 }).catch((e) => e);
      expect(err).toBeInstanceOf(ClosedError);
      expect(err).not.toBeInstanceOf(RefusedError);
      expect(err.code).toBe(CloseCode.Network);
      // A browser's error event says nothing more; the URL at least is named.
      expect(err.reason).toBe("WebSocket to ws://127.0.0.1:1/ failed to connect");
      expect(Date.now() - t0).toBeLessThan(30_000); // not the handshake timeout
    }
  });

  test("a connection without a WebSocket or a url says what to pass", async () => {
    const s = schema();
    const server = new FakeServer(() => {});
    const g = globalThis as { WebSocket?: unknown };
    const saved = g.WebSocket;
    g.WebSocket = undefined;
    try {
      await expect(Connection.connect({ url: "ws://x", schema: s })).rejects.toThrow(/no WebSocket: pass options.WebSocket/);
    } finally {
      g.WebSocket = saved;
    }
    await expect(Connection.connect({ schema: s, WebSocket: server.ctor() })).rejects.toThrow(/no url$/);
    await expect(Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor(), transport: "webtransport" })).rejects.toThrow(/no WebTransport: pass options.WebTransport/);
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
    const s = decoded(new Schema([unit]));
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor() });
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5)], { gained: [makeId(1, 0)] })) sock.deliver(m);
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

  test("an RPC on an entity this client does not own, or unknown, throws and sends nothing", async () => {
    const unit = struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 });
    const none = struct("None", []);
    unit.rpcs = [{ id: 2, name: "jump", dir: 0, args: none }, { id: 3, name: "say", dir: 1, args: none }, { id: 4, name: "fire", dir: 0, args: none }];
    const s = decoded(new Schema([unit]));
    const server = new FakeServer((sock) => sock.deliver(welcome(s)));
    const c = await Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor() });
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5), create(2, 5)], { gained: [makeId(2, 0)] })) sock.deliver(m);
    const sent = sock.sent.length;
    const other = new Replica(s);
    other.applyTick([create(2, 5)], { gained: [makeId(2, 0)] });
    // Sent, each would close the connection (code 9, policy violation).
    expect(() => c.callRPC(makeId(1, 0), "jump")).toThrow("replica: RPC jump on Unit 1: not owned by this client");
    expect(() => c.callRPC(c.replica.entity(makeId(1, 0))!, 2)).toThrow("replica: RPC 2 on Unit 1: not owned by this client");
    expect(() => c.callRPC(makeId(7, 0), "jump")).toThrow("replica: RPC jump on entity 7: not owned by this client");
    expect(() => c.callRPC(other.entity(makeId(2, 0))!, "jump")).toThrow(/on Unit 2: not owned/); // another replica's
    expect(() => c.callRPC(makeId(2, 0), "jmp")).toThrow("replica: no client RPC jmp on Unit 2; Unit's client RPCs: jump, fire");
    expect(() => c.callRPC(makeId(2, 0), "say")).toThrow(/no client RPC say on Unit 2/); // a server RPC
    expect(sock.sent.length).toBe(sent);
    c.callRPC(makeId(2, 0), "fire");
    expect((parseMessage(sock.sent.at(-1)!) as RPC).rpc).toBe(4);
    c.close();
  });

  test("a call over the largest message the WELCOME states throws and sends nothing; one within it is sent", async () => {
    const note = struct("Note", [field(1, "text", ty(Kind.String))]);
    const unit = struct("Unit", [field(1, "hp", ty(Kind.Int16))], { id: 1 });
    unit.rpcs = [{ id: 1, name: "note", dir: 0, args: note }];
    const s = decoded(new Schema([unit]));
    const server = new FakeServer((sock) => sock.deliver(welcome(s, { maxMessage: 32 })));
    const c = await Connection.connect({ url: "ws://x", schema: s, WebSocket: server.ctor() });
    const sock = server.sockets[0]!;
    for (const m of tick(1n, [create(1, 5)], { gained: [makeId(1, 0)] })) sock.deliver(m);
    const sent = sock.sent.length;
    expect(() => c.callRPC(makeId(1, 0), "note", { text: "x".repeat(40) })).toThrow(/note is \d+ bytes, the server takes 32/);
    expect(sock.sent.length).toBe(sent);
    c.callRPC(makeId(1, 0), "note", { text: "x".repeat(10) });
    expect(sock.sent.length).toBe(sent + 1);
    expect(sock.sent.at(-1)!.length).toBeLessThanOrEqual(32);
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
    this.ready = server.fail
      ? Promise.reject(new Error("WebTransport connection rejected"))
      : new Promise((res) => (server.readyAfterMs ? setTimeout(res, server.readyAfterMs) : res()));
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
  /** Sessions take this long to be ready (UDP black-holed: QUIC slow to give up, or a slow path). */
  readyAfterMs = 0;
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

  test("auto mode gives WebTransport 60 % of the handshake timeout to connect, then WebSocket a whole one; forced WebTransport has it all", async () => {
    const s = schema();
    const wts = new FakeWTServer((wt) => wt.deliver(64, welcome(s)));
    wts.readyAfterMs = 1000;
    // The WebSocket server answers late too: more than what the handshake timeout leaves after WebTransport's try.
    const ws = new FakeServer((sock) => setTimeout(() => sock.deliver(welcome(s)), 250));
    const opts = { url: "ws://x", webTransportUrl: "https://x/replica", schema: s, WebTransport: wts.ctor(), WebSocket: ws.ctor(), handshakeTimeoutMs: 400 };
    const t0 = Date.now();
    const c = await Connection.connect(opts);
    expect(c.transport).toBe("websocket");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(240 + 250 - 5);
    // The WebTransport session that opens after its deadline is closed, not used.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() - t0) + 50));
    expect(wts.sessions[0]!.closedWith).toBeDefined();
    expect(wts.sessions[0]!.received).toHaveLength(0); // no HELLO
    c.close();
    wts.readyAfterMs = 300;
    const w = await Connection.connect({ ...opts, transport: "webtransport" });
    expect(w.transport).toBe("webtransport");
    w.close();
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
