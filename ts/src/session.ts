/**
 * Session messages (docs/protocol.md §10.2), the client's side: HELLO,
 * PING, PONG and RPC encoded; WELCOME, REFUSE, TICK, PING, PONG, RPC and
 * RESYNC decoded. Segments travel as messages of their own, without a type
 * byte; a TICK announces them. The server's side (HELLO decoded, the
 * others encoded) is in ./peer.ts, for tests and tools.
 */

import { EMPTY, begin, big, cat, leb128, put, putBig, putBool, putBytes, putU, putWide, split64, uvarint, varEnd, written, bits, bitsWide, bool, bytes, count, finish, hi, load, pos, string, u32, uBig } from "./bits.js";
import { ReplicaDecodeError, sessionError } from "./errors.js";
import { LIMIT_ORDER, withDefaults, type Limits } from "./decoder.js";
import { MsgType as M } from "./enums.js";

/** The protocol version this package speaks (§10.2). */
export const PROTOCOL_VERSION = 7;

/** Limits of what a message may carry (session/session.go). */
export const MAX_DESCRIPTOR = 1 << 20;
export const MAX_TOKEN = 4096;
export const MAX_TEXT = 1024;
export const MAX_LIMIT = 2 ** 31 - 1;
export const MAX_LEVEL = 4;
/** The most entities a resume block declares (§10.5); a client holding more does not resume. */
export const MAX_RESUME = 8192;

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
  type: M.Hello;
  version: number;
  /** Absent when the version is not {@link PROTOCOL_VERSION}: the rest is not read. */
  descriptor?: Uint8Array;
  token?: Uint8Array;
  limits?: Limits;
  /** Present when the client asks to resume a session (the resume bit is 1). */
  resume?: Resume;
}

export interface Welcome {
  type: M.Welcome;
  version: number;
  descriptor: Uint8Array;
  session: bigint;
  userId: string;
  tickRate: number;
  /** This session's resume ticket (§10.5); [0n, 0n]: the server does not resume. */
  ticket: Ticket;
  /** The server resumed the session the HELLO named: the client keeps its replica (§10.5). */
  resumed: boolean;
  /** The largest message the server takes from this client (0: not stated); a larger one would close the connection. */
  maxMessage: number;
}

export interface Refuse {
  type: M.Refuse;
  code: number;
  message: string;
}

export interface Tick {
  type: M.Tick;
  tick: bigint;
  /** Number of segment messages that follow. */
  segments: number;
  gained: number[];
  lost: number[];
  levels: { id: number; level: number }[];
}

export interface Ping {
  type: M.Ping;
  nonce: bigint;
}

export interface Pong {
  type: M.Pong;
  nonce: bigint;
}

export interface RPC {
  type: M.RPC;
  entity: number;
  rpc: number;
  /** The argument record (§6.1 record(T)), aliasing the message. */
  args: Uint8Array;
}

export interface Resync {
  type: M.Resync;
}

/** What a client receives. */
export type Message = Welcome | Refuse | Tick | Ping | Pong | RPC | Resync;

/** A writer of a message: its type byte, then its bit stream (§10.2). */
export const writer = (t: M): void => {
  begin();
  put(t, 8);
};

/** Writes a 64-bit field. */
export const write64 = (v: bigint): void => split64(v, (lo, hi) => putWide(lo, hi, 64));

/** Reads a 64-bit field as an unsigned BigInt. */
export const read64 = (): bigint => big(bitsWide(64), hi);

export const bad = (msg: string, bit?: number): never => {
  throw sessionError(msg, bit);
};

/**
 * Reads the bit stream of msg after its type byte with read, then checks
 * that only zero padding is left. Every failure is a ReplicaDecodeError
 * with code "session" that names the message type.
 */
export function readBody<T>(msg: Uint8Array, read: () => T): T {
  load(msg, 8);
  try {
    const m = read();
    finish();
    return m;
  } catch (e) {
    throw e instanceof ReplicaDecodeError && e.code !== "session" ? sessionError(`type ${msg[0]}: ${e.message}`, e.bit) : e;
  }
}

/**
 * Encodes a HELLO (§10.2); limits are sent with defaults applied, and the
 * resume block (§10.5) when m.resume is given. A resume block that breaks
 * §10.5's rules (more than MAX_RESUME entities, slots not ascending or out
 * of range, a level above 4) throws a RangeError.
 */
export const encodeHello = (m: { version?: number; descriptor: Uint8Array; token?: Uint8Array; limits?: Partial<Limits>; resume?: Resume }): Uint8Array => {
  writer(M.Hello);
  putU(m.version ?? PROTOCOL_VERSION, 0);
  putBytes(m.descriptor);
  putBytes(m.token ?? EMPTY);
  const l = withDefaults(m.limits);
  for (const k of LIMIT_ORDER) putU(Math.min(l[k], MAX_LIMIT), 8);
  const res = m.resume;
  putBool(!!res);
  if (res) {
    const held = res.held;
    const wrong = (what: unknown): never => {
      throw new RangeError("resume: " + what);
    };
    if (held.length > MAX_RESUME) wrong(held.length + " entities");
    res.ticket.forEach(write64);
    putBig(res.tick, 8);
    putU(held.length, 3);
    let prev = -1;
    for (const e of held) {
      if (e.slot <= prev || e.slot >= 1 << 24 || e.level > MAX_LEVEL) wrong(`slot ${e.slot}, level ${e.level}`);
      putU(e.slot - prev - 1, 2);
      prev = e.slot;
      put(e.generation, 8);
      putU(e.level, 0);
      putBool(e.owned);
    }
  }
  return written();
};

const nonceMsg = (t: M, nonce: bigint): Uint8Array => {
  writer(t);
  write64(nonce);
  return written();
};

export const encodePing = (nonce: bigint): Uint8Array => nonceMsg(M.Ping, nonce);
export const encodePong = (nonce: bigint): Uint8Array => nonceMsg(M.Pong, nonce);

/** Encodes an RPC: type, entity ID (4 bytes little-endian), RPC ID (minimal LEB128), arguments. */
export const encodeRPC = (entity: number, rpc: number, args: Uint8Array): Uint8Array =>
  cat(leb128([M.RPC, entity & 255, (entity >>> 8) & 255, (entity >>> 16) & 255, entity >>> 24], rpc >>> 0), args);

/** Decodes an RPC message; args aliases msg. */
export const parseRPC = (msg: Uint8Array): RPC => {
  if (msg.length < 6 || msg[0] !== M.RPC) bad("not an RPC");
  const id = uvarint(msg, 5, 5, "RPC ID");
  if (id < 1 || id > 0xffffffff) bad(id < 0 ? "RPC ID cut short" : "RPC ID range");
  return { type: M.RPC, entity: (msg[1]! | (msg[2]! << 8) | (msg[3]! << 16) | (msg[4]! << 24)) >>> 0, rpc: id, args: msg.subarray(varEnd) };
};

/**
 * Decodes a message a client receives (not a segment). Every failure is a
 * ReplicaDecodeError with code "session"; so is a HELLO, which only a
 * server receives (./peer.ts decodes it). Byte arrays are copies, except
 * an RPC's args.
 */
export const parseMessage = (msg: Uint8Array): Message => {
  const t = msg[0];
  if (t === M.RPC) return parseRPC(msg);
  if (!t || t === M.Hello || t > M.Resync) bad(t === undefined ? "empty" : "unknown type " + t);
  return readBody(msg, (): Message => {
    switch (t) {
      case M.Welcome:
        return {
          type: t,
          version: u32(),
          descriptor: bytes(MAX_DESCRIPTOR),
          session: uBig(8),
          userId: string(MAX_TEXT),
          tickRate: u32(4),
          ticket: [read64(), read64()],
          resumed: bool(),
          maxMessage: u32(8),
        };
      case M.Refuse: {
        const code = u32(4);
        if (code > 0xffff) bad("close code " + code, pos);
        return { type: t, code, message: string(MAX_TEXT) };
      }
      case M.Tick: {
        const tick = uBig(8);
        const segments = count(1, 16, 0, "segments");
        const [gained, lost] = [0, 0].map(() => Array.from({ length: count(3, 1 << 20, 32, "ids") }, () => bits(32)));
        const levels = Array.from({ length: count(3, 1 << 20, 33, "levels") }, () => {
          const id = bits(32);
          const level = u32(0);
          return level > MAX_LEVEL ? bad(`level ${level} > ${MAX_LEVEL}`, pos) : { id, level };
        });
        return { type: t, tick, segments, gained: gained!, lost: lost!, levels };
      }
      case M.Resync:
        return { type: t };
      default:
        return { type: t as M.Ping | M.Pong, nonce: read64() };
    }
  });
};
