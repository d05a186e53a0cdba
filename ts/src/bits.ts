/**
 * Bit-level primitives of the wire format (docs/protocol.md §1): a
 * least-significant-bit-first bit stream, the U(k) code, zigzag, strings.
 *
 * Values up to 64 bits are returned as two unsigned 32-bit halves: a read
 * returns the low half and leaves the high half in `hi`. Most values are
 * 32 bits or less, so the hot paths never touch BigInt.
 */

import { fail } from "./errors.js";

/** MASK[n] = 2^n − 1 for n ≤ 32, as a non-negative number. */
export const MASK: readonly number[] = Array.from({ length: 33 }, (_, n) => 2 ** n - 1);

// MASK as 32-bit integers (MASK32[32] is −1): loads stay untagged ints in
// optimized code, where MASK's doubles would not.
const MASK32 = Int32Array.from(MASK);

const ctz = (x: number): number => 31 - Math.clz32(x & -x);

// ignoreBOM: a leading U+FEFF is part of the string, as in Go.
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * Decodes UTF-8 bytes (b[start, end)) to a string; invalid sequences become
 * U+FFFD (docs/protocol.md OQ 10). Short ASCII takes a fast path.
 */
export const decodeUTF8 = (b: Uint8Array, start = 0, end = b.length): string => {
  let s = "";
  for (let i = start; i < end && end - start < 65; i++) {
    if (b[i]! > 127) break;
    s += String.fromCharCode(b[i]!);
    if (i === end - 1) return s;
  }
  return start === end ? "" : utf8.decode(b.subarray(start, end));
};

const utf8enc = new TextEncoder();

/** Encodes a string as UTF-8. */
export const encodeUTF8 = (s: string): Uint8Array => utf8enc.encode(s);

// The bit stream being read. There is one: every decoder reads its input
// to the end (or to an error) before another starts, and none is
// reentered (callbacks run after a tick is decoded). Module variables
// rather than an object's properties: the bundle then reads them as
// locals, with short names. Every failure throws a ReplicaDecodeError.

/** The input followed by at least 8 zero bytes, so that reads near the end need no bounds checks. */
let buf = new Uint8Array(64);
/** The next bit to read. */
export let pos = 0;
/** The number of bits of input. */
export let len = 0;
/** The high 32 bits of the last value read by {@link u} or {@link bitsWide}. */
export let hi = 0;

/** Starts reading b at bit at. */
export const load = (b: Uint8Array, at = 0): void => {
  const n = b.length;
  if (buf.length < n + 8) buf = new Uint8Array(Math.max(n + 8, buf.length * 2));
  buf.set(b);
  buf.fill(0, n, n + 8);
  pos = at;
  hi = 0;
  len = n * 8;
};

/** Throws a malformed-input error at the current position. */
export const malformed = (msg: string): never => fail("malformed", msg, pos);

/** The 32 bits from the current position (zeros past the end), unsigned. */
const peek32 = (): number => {
  const i = pos >>> 3;
  const sh = pos & 7;
  let w = (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24)) >>> sh;
  if (sh) w |= buf[i + 4]! << (32 - sh);
  return w >>> 0;
};

/** Advances by n bits, failing if that passes the end. */
const skip = (n: number): void => {
  if ((pos += n) > len) fail("truncated", "ends early", (pos = len));
};

/** Reads n ≤ 32 bits, unsigned. */
export const bits = (n: number): number => {
  if (!n) return 0;
  const w = peek32();
  skip(n);
  return n === 32 ? w : (w & MASK32[n]!) >>> 0;
};

/** Reads one bit as a boolean. */
export const bool = (): boolean => !!bits(1);

/** Reads n ≤ 64 bits: returns the low 32, leaves the high 32 in {@link hi}. */
export const bitsWide = (n: number): number => {
  const lo = bits(Math.min(n, 32));
  hi = n > 32 ? bits(n - 32) : 0;
  return lo;
};

/** Reads a U(k) code (§1.2): returns the low 32 bits, leaves the high 32 in {@link hi}. */
export const u = (k: number): number => {
  const w = peek32();
  if (!(w & 1)) {
    if (k < 32) {
      skip(k + 1);
      hi = 0;
      return ((w >>> 1) & MASK32[k]!) >>> 0;
    }
  } else if (w !== 0xffffffff) {
    const ones = ctz(~w);
    const b = k + ones;
    if (ones + b <= 32 && b <= 32) {
      skip(ones + b);
      hi = 0;
      // b − 1 value bits under an implicit leading 1: an OR, in 32-bit ints.
      return (((w >>> (ones + 1)) & MASK32[b - 1]!) | (1 << (b - 1))) >>> 0;
    }
  }
  return uSlow(k);
};

// Codes the fast path does not take: more than 32 bits with the ones, or
// k ≥ 32; a bit at a time. (k is at most 63: a bits(6) or a constant.)
const uSlow = (k: number): number => {
  let ones = 0;
  while (ones < 64 - k && bits(1)) ones++;
  // b value bits under an implicit leading 1 at bit b, or k bits.
  const b = k + ones - 1;
  const lo = bitsWide(ones ? b : k);
  if (!ones) return lo;
  if (b < 32) return lo + 2 ** b;
  hi = (hi | (1 << (b - 32))) >>> 0;
  return lo;
};

/** Reads a U(k) value that must fit 32 bits. */
export const u32 = (k = 0): number => {
  const v = u(k);
  return hi ? malformed("over 32 bits") : v;
};

/** Reads a U(k) value as a BigInt. */
export const uBig = (k: number): bigint => big(u(k), hi);

/**
 * Reads a U(k) count and checks it against max and against the bits left,
 * assuming each counted item takes at least minBits bits.
 */
export const count = (k: number, max: number, minBits: number, what: string): number => {
  const start = pos;
  const n = u(k);
  if (hi || n > max) fail("limit", `${what} ${n} > ${max}`, start);
  if (n * minBits > len - pos) fail("truncated", `${what} ${n}`, start);
  return n;
};

// The last byte string read: its length, and its copy when it was not
// aligned (a string's in STRBUF when it fits).
const STRBUF = new Uint8Array(64);
let strLen = 0;
let strCopy: Uint8Array;

/**
 * Reads the length of a byte string of at most max bytes (§1.4), and
 * returns its first byte's offset in buf when it is aligned, else −1
 * after copying it into strCopy: out when it fits, else a new array.
 */
const str = (max: number, out?: Uint8Array): number => {
  const n = (strLen = count(4, max, 8, "length"));
  const i = pos >>> 3;
  if (!(pos & 7)) {
    skip(n * 8);
    return i;
  }
  strCopy = out && n <= out.length ? out : new Uint8Array(n);
  for (let j = 0; j < n; j++) strCopy[j] = bits(8);
  return -1;
};

/** Reads a length-prefixed byte string of at most max bytes (§1.4) into a new array. */
export const bytes = (max: number): Uint8Array => {
  const i = str(max);
  return i < 0 ? strCopy : buf.slice(i, i + strLen);
};

/** Reads a length-prefixed string of at most max bytes, decoded as UTF-8 (non-fatal). */
export const string = (max: number): string => {
  const i = str(max, STRBUF);
  return i < 0 ? decodeUTF8(strCopy, 0, strLen) : decodeUTF8(buf, i, i + strLen);
};

/** Requires that only zero padding (fewer than 8 bits) is left. */
export const finish = (): void => {
  const rem = len - pos;
  if (rem > 7 || bits(rem)) malformed("trailing");
};

/**
 * A reader of its own bit stream, for tests and tools: each call reads
 * with the module's reader from where the last one stopped.
 */
export class BitReader {
  private b: Uint8Array = new Uint8Array(0);
  /** Next bit to read. */
  pos = 0;
  /** Number of bits of input. */
  len = 0;
  /** High 32 bits of the last value read by {@link u} or {@link bitsWide}. */
  hi = 0;

  constructor(b?: Uint8Array) {
    if (b) this.reset(b);
  }

  /** Starts reading b from its first bit. */
  reset(b: Uint8Array): void {
    this.b = b;
    this.pos = this.hi = 0;
    this.len = b.length * 8;
  }

  private run<T>(f: () => T): T {
    load(this.b, this.pos);
    hi = this.hi;
    try {
      return f();
    } finally {
      this.pos = pos;
      this.hi = hi;
    }
  }

  bits = (n: number): number => this.run(() => bits(n));
  bool = (): boolean => this.run(bool);
  bitsWide = (n: number): number => this.run(() => bitsWide(n));
  u = (k: number): number => this.run(() => u(k));
  u32 = (k?: number): number => this.run(() => u32(k));
  uBig = (k: number): bigint => this.run(() => uBig(k));
  count = (k: number, max: number, minBits: number, what: string): number => this.run(() => count(k, max, minBits, what));
  bytes = (max: number): Uint8Array => this.run(() => bytes(max));
  string = (max: number): string => this.run(() => string(max));
  finish = (): void => this.run(finish);
  malformed = (msg: string): never => this.run(() => malformed(msg));
}

// The bit stream being written, as the one read above: one at a time. It
// carries HELLOs and RPC arguments, not ticks: a bit at a time.
let wbuf: Uint8Array = new Uint8Array(64);
let wpos = 0;

/** Starts writing a new stream. */
export const begin = (): void => {
  wbuf = new Uint8Array(64);
  wpos = 0;
};

/** Writes the low n ≤ 32 bits of v (n up to 64 for v = −1: all ones). */
export const put = (v: number, n: number): void => {
  for (let i = 0; i < n; i++, wpos++) {
    const j = wpos >>> 3;
    if (j === wbuf.length) wbuf = cat(wbuf, new Uint8Array(j));
    wbuf[j]! |= ((v >>> i) & 1) << (wpos & 7);
  }
};

/** Writes n ≤ 64 bits of the value with halves lo, hi. */
export const putWide = (lo: number, hi: number, n: number): void => {
  put(lo, Math.min(n, 32));
  put(hi, n - 32);
};

export const putBool = (b: boolean): void => put(+b, 1);

/** Writes the U(k) code of the value with halves lo, hi (§1.2); lo may be any integer below 2^53 when hi is 0. */
export const putU = (lo: number, k: number, hi = 0): void => {
  if (lo > 0xffffffff) {
    hi = Math.floor(lo / 2 ** 32);
    lo %= 2 ** 32;
  }
  hi >>>= 0;
  const b = bitLen(lo, hi);
  // b − k ones and a 0 (none after 64 − k ones), then the low b − 1 bits
  // (the top one implied); or a 0 and k bits.
  const ones = b > k ? b - k : 0;
  put(-1, ones);
  if (ones < 64 - k) put(0, 1);
  putWide(lo, hi, ones ? b - 1 : k);
};

/** The bit length of the unsigned value with 32-bit halves lo, hi. */
export const bitLen = (lo: number, hi: number): number => (hi ? 64 - Math.clz32(hi) : 32 - Math.clz32(lo));

/** f of the halves (lo, hi) of v's 64-bit two's complement. */
export const split64 = <T>(v: bigint, f: (lo: number, hi: number) => T): T => {
  const u = BigInt.asUintN(64, v);
  return f(Number(u & 0xffffffffn), Number(u >> 32n));
};

/** Writes the U(k) code of a BigInt in 0..2^64−1. */
export const putBig = (v: bigint, k: number): void => split64(v, (lo, hi) => putU(lo, k, hi));

/** Writes a length-prefixed byte string. */
export const putBytes = (b: Uint8Array): void => {
  putU(b.length, 4);
  for (const x of b) put(x, 8);
};

/** Writes a string as UTF-8 bytes. */
export const putString = (s: string): void => putBytes(encodeUTF8(s));

/** Returns the bytes written, padded with zero bits to a byte boundary. */
export const written = (): Uint8Array => wbuf.slice(0, (wpos + 7) >>> 3);

/**
 * A writer of its own bit stream, for tests and tools (the inverse of
 * {@link BitReader}): each call writes with the module's writer after
 * what the last one wrote.
 */
export class BitWriter {
  private buf: Uint8Array = new Uint8Array(64);
  /** Bits written. */
  pos = 0;

  private run<T>(f: () => T): T {
    [wbuf, wpos] = [this.buf, this.pos];
    try {
      return f();
    } finally {
      [this.buf, this.pos] = [wbuf, wpos];
    }
  }

  bits = (v: number, n: number): void => this.run(() => put(v, n));
  bitsWide = (lo: number, hi: number, n: number): void => this.run(() => putWide(lo, hi, n));
  bool = (b: boolean): void => this.run(() => putBool(b));
  u = (lo: number, k: number, hi?: number): void => this.run(() => putU(lo, k, hi));
  uBig = (v: bigint, k: number): void => this.run(() => putBig(v, k));
  bytes = (b: Uint8Array): void => this.run(() => putBytes(b));
  string = (s: string): void => this.run(() => putString(s));
  finish = (): Uint8Array => this.run(written);
}

/** zigzag on 64 bits as BigInt. */
export const zigzagBig = (v: bigint): bigint => {
  v = BigInt.asIntN(64, v);
  return BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
};

/** unzigzag on 64 bits as BigInt. */
export const unzigzagBig = (u: bigint): bigint => {
  return BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n));
};

/** Appends n as an unsigned LEB128 varint to out; returns out. */
export const leb128 = (out: number[], n: number): number[] => {
  for (; n > 127; n = Math.floor(n / 128)) out.push((n & 127) | 128);
  out.push(n);
  return out;
};

/** The index after the last varint {@link uvarint} read. */
export let varEnd = 0;

/**
 * Reads an unsigned LEB128 varint of at most max bytes from b at i and
 * leaves the index after it in varEnd; returns −1 if b ends first. One
 * longer or not minimal is a "session" error naming what.
 */
export const uvarint = (b: Uint8Array, i: number, max: number, what: string): number => {
  let n = 0;
  for (let s = 0, x; ; s++) {
    if (s === max) fail("session", what + " too long");
    if ((x = b[i + s]) === undefined) return -1;
    if (!x && s) fail("session", what + " not minimal");
    n += (x & 127) * 128 ** s;
    if (x < 128) {
      varEnd = i + s + 1;
      return n;
    }
  }
};

/** No bytes: one shared instance (having no elements, it cannot be written to). */
export const EMPTY = new Uint8Array(0);

/** The bytes of a followed by those of b. */
export const cat = (a: ArrayLike<number>, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
};

/** Compares byte strings bytewise (a shorter prefix first). */
export const compareBytes = (a: Uint8Array, b: Uint8Array): number => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
};

/** The unsigned 64-bit integer of halves lo, hi. */
export const big = (lo: number, hi: number): bigint => (BigInt(hi) << 32n) | BigInt(lo);
