/**
 * Session messages (docs/protocol.md §10.2), the server's side: HELLO
 * decoded; WELCOME, REFUSE, TICK and RESYNC encoded. For tests and tools
 * that play a server; the client runtime (./index.ts) leaves it out.
 */

import { LIMIT_ORDER, type Limits } from "./decoder.js";
import { MsgType as M } from "./enums.js";
import { put, putBig, putBool, putBytes, putString, putU, written } from "./bits.js";
import { bits, bool, bytes, count, hi, load, pos, u, u32, uBig } from "./bits.js";

/** Message types (§10.2): the first byte of every message but a segment. */
export const MsgType = {
  Hello: M.Hello,
  Welcome: M.Welcome,
  Refuse: M.Refuse,
  Tick: M.Tick,
  Ping: M.Ping,
  Pong: M.Pong,
  RPC: M.RPC,
  Resync: M.Resync,
} as const satisfies { readonly [N in keyof typeof M]: M };
export type MsgType = M;
import {
  MAX_DESCRIPTOR, MAX_LEVEL, MAX_LIMIT, MAX_RESUME, MAX_TOKEN, PROTOCOL_VERSION, bad, parseMessage, read64, readBody,
  write64, writer, type HeldEntity, type Hello, type Message, type Refuse, type Resume, type Tick, type Welcome,
} from "./session.js";

/**
 * Decodes a HELLO. A HELLO whose version is not PROTOCOL_VERSION is read no
 * further than the version (§10.2). Every failure is a ReplicaDecodeError
 * with code "session".
 */
export function parseHello(msg: Uint8Array): Hello {
  if (msg[0] !== MsgType.Hello) bad("not a HELLO");
  return readBody(msg, () => {
    const version = u32();
    if (version !== PROTOCOL_VERSION) {
      load(new Uint8Array(0)); // the rest has that version's layout
      return { type: MsgType.Hello, version };
    }
    const descriptor = bytes(MAX_DESCRIPTOR);
    const token = bytes(MAX_TOKEN);
    const limits = {} as Limits;
    for (const k of LIMIT_ORDER) {
      const v = u32(8);
      if (v === 0 || v > MAX_LIMIT) bad(`${k} out of range`, pos);
      limits[k] = v;
    }
    const m: Hello = { type: MsgType.Hello, version, descriptor, token, limits };
    if (bool()) {
      const ticket = [read64(), read64()] as const;
      const tick = uBig(8);
      // An entry takes at least 13 bits: U(2) gap, bits(8), U(0) level, bit.
      const held = new Array<HeldEntity>(count(3, MAX_RESUME, 13, "resume entities"));
      let slot = -1;
      for (let i = 0; i < held.length; i++) {
        slot += 1 + u(2);
        if (hi !== 0 || slot >= 1 << 24) bad("resume: slot out of range", pos);
        const generation = bits(8);
        const level = u32(0);
        if (level > MAX_LEVEL) bad(`resume: level ${level} > ${MAX_LEVEL}`, pos);
        held[i] = { slot, generation, level, owned: bool() };
      }
      m.resume = { ticket, tick, held } satisfies Resume;
    }
    return m;
  });
}

/** Decodes any message but a segment: a HELLO with {@link parseHello}, the others with parseMessage. */
export function parseAny(msg: Uint8Array): Message | Hello {
  return msg[0] === MsgType.Hello ? parseHello(msg) : parseMessage(msg);
}

/** Encodes a WELCOME; no ticket is [0n, 0n], no maxMessage 0 (none stated). */
export function encodeWelcome(m: Omit<Welcome, "type" | "ticket" | "resumed" | "maxMessage"> & Partial<Pick<Welcome, "ticket" | "resumed" | "maxMessage">>): Uint8Array {
  writer(MsgType.Welcome);
  putU(m.version, 0);
  putBytes(m.descriptor);
  putBig(m.session, 8);
  putString(m.userId);
  putU(m.tickRate, 4);
  write64(m.ticket?.[0] ?? 0n);
  write64(m.ticket?.[1] ?? 0n);
  putBool(m.resumed ?? false);
  putU(m.maxMessage ?? 0, 8);
  return written();
}

/** Encodes a REFUSE. */
export function encodeRefuse(m: Omit<Refuse, "type">): Uint8Array {
  writer(MsgType.Refuse);
  putU(m.code, 4);
  putString(m.message);
  return written();
}

/** Encodes a TICK. */
export function encodeTick(m: Omit<Tick, "type" | "gained" | "lost" | "levels"> & Partial<Pick<Tick, "gained" | "lost" | "levels">>): Uint8Array {
  writer(MsgType.Tick);
  putBig(m.tick, 8);
  putU(m.segments, 1);
  for (const ids of [m.gained ?? [], m.lost ?? []]) {
    putU(ids.length, 3);
    for (const id of ids) put(id, 32);
  }
  const levels = m.levels ?? [];
  putU(levels.length, 3);
  for (const l of levels) {
    put(l.id, 32);
    putU(l.level, 0);
  }
  return written();
}

export const encodeResync = (): Uint8Array => Uint8Array.of(MsgType.Resync);
