/**
 * Session messages (docs/protocol.md §10.2): HELLO, WELCOME, REFUSE, TICK,
 * PING, PONG, RPC and RESYNC, encoded and decoded. Segments travel as
 * messages of their own, without a type byte; a TICK announces them.
 */

import { BitReader, BitWriter } from "./bits.js";
import { ReplicaDecodeError } from "./errors.js";
import { LIMIT_ORDER, withDefaults, type Limits } from "./decoder.js";

/** The protocol version this package speaks (§10.2). */
export const PROTOCOL_VERSION = 6;

/** Message types: the first byte of every message but a segment. */
export const MsgType = {
  Hello: 1,
  Welcome: 2,
  Refuse: 3,
  Tick: 4,
  Ping: 5,
  Pong: 6,
  RPC: 7,
  Resync: 8,
} as const;

/** Limits of what a message may carry (session/session.go). */
export const MAX_DESCRIPTOR = 1 << 20;
export const MAX_TOKEN = 4096;
export const MAX_TEXT = 1024;
export const MAX_SEGMENTS = 16;
export const MAX_LIST = 1 << 20;
const MAX_LIMIT = 2 ** 31 - 1;
const MAX_LEVEL = 4;
/** The most entities a resume block declares (§10.5); a client holding more does not resume. */
export const MAX_RESUME = 16384;
const SLOT_LIMIT = 1 << 24;

/**
 * A resume ticket (§10.5): the WELCOME's two `bits(64)`, in wire order, as
 * unsigned BigInts. [0n, 0n] is no ticket: the server does not resume.
 */
export type Ticket = readonly [bigint, bigint];

/** What a client's replica holds of one entity, as a resume block declares it (§10.5). An Entity is one. */
export interface HeldEntity {
  /** The network ID's slot, ID & 0xFFFFFF. */
  readonly slot: number;
  /** The network ID's generation, ID >>> 24. */
  readonly generation: number;
  /** Its level of detail (§5.8), 0..4: the class's nbands when no TICK changed it. */
  readonly level: number;
  readonly owned: boolean;
}

/** The resume block of a HELLO (§10.5). */
export interface Resume {
  ticket: Ticket;
  /** The last tick the client applied. */
  tick: bigint;
  /** The entities the replica holds, by ascending slot; at most {@link MAX_RESUME}. */
  held: readonly HeldEntity[];
}

export interface Hello {
  type: typeof MsgType.Hello;
  version: number;
  /** Absent when the version is not {@link PROTOCOL_VERSION}: the rest is not read. */
  descriptor?: Uint8Array;
  token?: Uint8Array;
  limits?: Limits;
  /** Present when the client asks to resume a session (the resume bit is 1). */
  resume?: Resume;
}

export interface Welcome {
  type: typeof MsgType.Welcome;
  version: number;
  descriptor: Uint8Array;
  session: bigint;
  userId: string;
  tickRate: number;
  /** This session's resume ticket (§10.5); [0n, 0n]: the server does not resume. */
  ticket: Ticket;
  /** The server resumed the session the HELLO named: the client keeps its replica (§10.5). */
  resumed: boolean;
}

export interface Refuse {
  type: typeof MsgType.Refuse;
  code: number;
  message: string;
}

export interface Tick {
  type: typeof MsgType.Tick;
  tick: bigint;
  /** Number of segment messages that follow. */
  segments: number;
  gained: number[];
  lost: number[];
  levels: { id: number; level: number }[];
}

export interface Ping {
  type: typeof MsgType.Ping;
  nonce: bigint;
}

export interface Pong {
  type: typeof MsgType.Pong;
  nonce: bigint;
}

export interface RPC {
  type: typeof MsgType.RPC;
  entity: number;
  rpc: number;
  /** The argument record (§6.1 record(T)), aliasing the message. */
  args: Uint8Array;
}

export interface Resync {
  type: typeof MsgType.Resync;
}

export type Message = Hello | Welcome | Refuse | Tick | Ping | Pong | RPC | Resync;

function withType(t: number, body: Uint8Array): Uint8Array {
  const out = new Uint8Array(body.length + 1);
  out[0] = t;
  out.set(body, 1);
  return out;
}

const write64 = (w: BitWriter, v: bigint): void => {
  const u = BigInt.asUintN(64, v);
  w.bitsWide(Number(u & 0xffffffffn), Number(u >> 32n), 64);
};

const read64 = (r: BitReader): bigint => {
  const lo = r.bitsWide(64);
  return (BigInt(r.hi) << 32n) | BigInt(lo);
};

/**
 * Encodes a HELLO (§10.2); limits are sent with defaults applied, and the
 * resume block (§10.5) when m.resume is given. A resume block that breaks
 * §10.5's rules (more than MAX_RESUME entities, slots not ascending or out
 * of range, a level above 4) throws a RangeError.
 */
export function encodeHello(m: { version?: number; descriptor: Uint8Array; token?: Uint8Array; limits?: Partial<Limits>; resume?: Resume }): Uint8Array {
  const w = new BitWriter();
  w.u(m.version ?? PROTOCOL_VERSION, 0);
  w.bytes(m.descriptor);
  w.bytes(m.token ?? new Uint8Array(0));
  const l = withDefaults(m.limits);
  for (const k of LIMIT_ORDER) w.u(Math.min(l[k], MAX_LIMIT), 8);
  const res = m.resume;
  w.bool(res !== undefined);
  if (res) {
    const held = res.held;
    if (held.length > MAX_RESUME) throw new RangeError(`resume: ${held.length} entities > ${MAX_RESUME}`);
    write64(w, res.ticket[0]);
    write64(w, res.ticket[1]);
    w.uBig(res.tick, 8);
    w.u(held.length, 3);
    let prev = -1;
    for (const e of held) {
      if (e.slot <= prev || e.slot >= SLOT_LIMIT || e.level > MAX_LEVEL) {
        throw new RangeError(`resume: slot ${e.slot} after ${prev}, level ${e.level}`);
      }
      w.u(e.slot - prev - 1, 2);
      prev = e.slot;
      w.bits(e.generation, 8);
      w.u(e.level, 0);
      w.bool(e.owned);
    }
  }
  return withType(MsgType.Hello, w.finish());
}

/** Encodes a WELCOME. */
export function encodeWelcome(m: Omit<Welcome, "type" | "ticket" | "resumed"> & Partial<Pick<Welcome, "ticket" | "resumed">>): Uint8Array {
  const w = new BitWriter();
  w.u(m.version, 0);
  w.bytes(m.descriptor);
  w.uBig(m.session, 8);
  w.string(m.userId);
  w.u(m.tickRate, 4);
  write64(w, m.ticket?.[0] ?? 0n);
  write64(w, m.ticket?.[1] ?? 0n);
  w.bool(m.resumed ?? false);
  return withType(MsgType.Welcome, w.finish());
}

/** Encodes a REFUSE. */
export function encodeRefuse(m: Omit<Refuse, "type">): Uint8Array {
  const w = new BitWriter();
  w.u(m.code, 4);
  w.string(m.message);
  return withType(MsgType.Refuse, w.finish());
}

/** Encodes a TICK. */
export function encodeTick(m: Omit<Tick, "type" | "gained" | "lost" | "levels"> & Partial<Pick<Tick, "gained" | "lost" | "levels">>): Uint8Array {
  const w = new BitWriter();
  w.uBig(m.tick, 8);
  w.u(m.segments, 1);
  for (const ids of [m.gained ?? [], m.lost ?? []]) {
    w.u(ids.length, 3);
    for (const id of ids) w.bits(id, 32);
  }
  const levels = m.levels ?? [];
  w.u(levels.length, 3);
  for (const l of levels) {
    w.bits(l.id, 32);
    w.u(l.level, 0);
  }
  return withType(MsgType.Tick, w.finish());
}

function nonceMsg(t: number, nonce: bigint): Uint8Array {
  const w = new BitWriter();
  const u = BigInt.asUintN(64, nonce);
  w.bitsWide(Number(u & 0xffffffffn), Number(u >> 32n), 64);
  return withType(t, w.finish());
}

export const encodePing = (nonce: bigint): Uint8Array => nonceMsg(MsgType.Ping, nonce);
export const encodePong = (nonce: bigint): Uint8Array => nonceMsg(MsgType.Pong, nonce);
export const encodeResync = (): Uint8Array => Uint8Array.of(MsgType.Resync);

/** Encodes an RPC: type, entity ID (4 bytes little-endian), RPC ID (minimal LEB128), arguments. */
export function encodeRPC(entity: number, rpc: number, args: Uint8Array): Uint8Array {
  const head = [MsgType.RPC, entity & 0xff, (entity >>> 8) & 0xff, (entity >>> 16) & 0xff, (entity >>> 24) & 0xff];
  let id = rpc >>> 0;
  do {
    let b = id & 0x7f;
    id = Math.floor(id / 128);
    if (id > 0) b |= 0x80;
    head.push(b);
  } while (id > 0);
  const out = new Uint8Array(head.length + args.length);
  out.set(head);
  out.set(args, head.length);
  return out;
}

function bad(msg: string, bit = -1): never {
  throw new ReplicaDecodeError("session", msg, bit);
}

/** Decodes an RPC message; args aliases msg. */
export function parseRPC(msg: Uint8Array): RPC {
  if (msg.length < 6 || msg[0] !== MsgType.RPC) bad("not an RPC message");
  const entity = (msg[1]! | (msg[2]! << 8) | (msg[3]! << 16) | (msg[4]! << 24)) >>> 0;
  let id = 0;
  let i = 5;
  let shift = 0;
  for (;;) {
    if (i >= msg.length || shift > 28) bad("RPC ID");
    const b = msg[i++]!;
    id += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) {
      if (b === 0 && i - 5 > 1) bad("RPC ID not minimal");
      break;
    }
  }
  if (id === 0 || id > 0xffffffff) bad("RPC ID out of range");
  return { type: MsgType.RPC, entity, rpc: id, args: msg.subarray(i) };
}

/** Reads a HELLO's resume block (§10.5), after its resume bit. */
function readResume(r: BitReader): Resume {
  const ticket: Ticket = [read64(r), read64(r)];
  const tick = r.uBig(8);
  // An entry takes at least 13 bits: U(2) gap, bits(8), U(0) level, bit.
  const n = r.count(3, MAX_RESUME, 13, "resume entities");
  const held: HeldEntity[] = new Array(n);
  let prev = -1;
  for (let i = 0; i < n; i++) {
    const gap = r.u(2);
    const slot = prev + 1 + gap;
    if (r.hi !== 0 || slot >= SLOT_LIMIT) bad("resume: slot out of range", r.pos);
    prev = slot;
    const generation = r.bits(8);
    const level = r.u(0);
    if (r.hi !== 0 || level > MAX_LEVEL) bad(`resume: level ${level} > ${MAX_LEVEL}`, r.pos);
    held[i] = { slot, generation, level, owned: r.bool() };
  }
  return { ticket, tick, held };
}

const TYPE_NAMES = ["", "HELLO", "WELCOME", "REFUSE", "TICK", "PING", "PONG", "RPC", "RESYNC"];

/**
 * Decodes a message (not a segment). Every failure is a
 * ReplicaDecodeError with code "session". Byte arrays are copies, except
 * an RPC's args.
 */
export function parseMessage(msg: Uint8Array): Message {
  if (msg.length === 0) bad("empty message");
  const t = msg[0]!;
  if (t === MsgType.RPC) return parseRPC(msg);
  if (t === MsgType.Resync) {
    if (msg.length !== 1) bad("RESYNC: trailing data");
    return { type: MsgType.Resync };
  }
  if (t < MsgType.Hello || t > MsgType.Resync) bad(`unknown type ${t}`);
  const r = new BitReader(msg.subarray(1));
  let m: Message;
  try {
    const u32 = (): number => {
      const v = r.u(0);
      if (r.hi !== 0) bad("does not fit 32 bits", r.pos);
      return v;
    };
    switch (t) {
      case MsgType.Hello: {
        const version = u32();
        if (version !== PROTOCOL_VERSION) return { type: MsgType.Hello, version };
        const descriptor = r.bytes(MAX_DESCRIPTOR);
        const token = r.bytes(MAX_TOKEN);
        const limits = {} as Limits;
        for (const k of LIMIT_ORDER) {
          const v = r.u(8);
          if (r.hi !== 0 || v === 0 || v > MAX_LIMIT) bad(`${k} out of range`, r.pos);
          limits[k] = v;
        }
        m = { type: MsgType.Hello, version, descriptor, token, limits };
        if (r.bool()) m.resume = readResume(r);
        break;
      }
      case MsgType.Welcome: {
        const version = u32();
        const descriptor = r.bytes(MAX_DESCRIPTOR);
        const session = r.uBig(8);
        const userId = r.string(MAX_TEXT);
        const tickRate = r.u(4);
        if (r.hi !== 0) bad("tick rate does not fit 32 bits", r.pos);
        const ticket: Ticket = [read64(r), read64(r)];
        m = { type: MsgType.Welcome, version, descriptor, session, userId, tickRate, ticket, resumed: r.bool() };
        break;
      }
      case MsgType.Refuse: {
        const code = r.u(4);
        if (r.hi !== 0 || code > 0xffff) bad(`close code ${code}`, r.pos);
        m = { type: MsgType.Refuse, code, message: r.string(MAX_TEXT) };
        break;
      }
      case MsgType.Tick: {
        const tick = r.uBig(8);
        const segments = r.count(1, MAX_SEGMENTS, 0, "segments");
        const lists: number[][] = [];
        for (let j = 0; j < 2; j++) {
          const n = r.count(3, MAX_LIST, 32, "owned entities");
          const ids = new Array<number>(n);
          for (let i = 0; i < n; i++) ids[i] = r.bits(32);
          lists.push(ids);
        }
        const n = r.count(3, MAX_LIST, 33, "level changes");
        const levels: { id: number; level: number }[] = [];
        for (let i = 0; i < n; i++) {
          const id = r.bits(32);
          const level = r.u(0);
          if (r.hi !== 0 || level > MAX_LEVEL) bad(`level ${level} > ${MAX_LEVEL}`, r.pos);
          levels.push({ id, level });
        }
        m = { type: MsgType.Tick, tick, segments, gained: lists[0]!, lost: lists[1]!, levels };
        break;
      }
      default: {
        const lo = r.bitsWide(64);
        const nonce = (BigInt(r.hi) << 32n) | BigInt(lo);
        m = t === MsgType.Ping ? { type: MsgType.Ping, nonce } : { type: MsgType.Pong, nonce };
      }
    }
    r.finish("message");
  } catch (e) {
    if (e instanceof ReplicaDecodeError && e.code !== "session") {
      throw new ReplicaDecodeError("session", `${TYPE_NAMES[t]}: ${e.message}`, e.bit);
    }
    throw e;
  }
  return m;
}
