/**
 * Bit-level primitives of the wire format (docs/protocol.md §1): a
 * least-significant-bit-first bit stream, the U(k) code, zigzag, strings.
 *
 * Values up to 64 bits are returned as two unsigned 32-bit halves: a read
 * returns the low half and leaves the high half in `hi`. Most values are
 * 32 bits or less, so the hot paths never touch BigInt.
 */

import { ReplicaDecodeError } from "./errors.js";

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
export function decodeUTF8(b: Uint8Array, start?: number, end?: number): string {
  b = b.subarray(start, end);
  return b.length < 65 && b.every((x) => x < 128) ? String.fromCharCode(...b) : utf8.decode(b);
}

const utf8enc = new TextEncoder();

/** Encodes a string as UTF-8. */
export const encodeUTF8 = (s: string): Uint8Array => utf8enc.encode(s);

/** Reads a bit stream. Every failure throws a {@link ReplicaDecodeError}. */
export class BitReader {
  /** The input followed by at least 8 zero bytes, so that reads near the end need no bounds checks. */
  private buf = new Uint8Array(8);
  private scratch = new Uint8Array(64);
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
    if (this.scratch.length < b.length + 8) this.scratch = new Uint8Array(Math.max(b.length + 8, this.scratch.length * 2));
    const s = (this.buf = this.scratch);
    s.set(b);
    s.fill(0, b.length, b.length + 8);
    this.pos = this.hi = 0;
    this.len = b.length * 8;
  }

  /** Throws a malformed-input error at the current position. */
  malformed(msg: string): never {
    throw new ReplicaDecodeError("malformed", msg, this.pos);
  }

  /** The 32 bits from the current position (zeros past the end), unsigned. */
  peek32(): number {
    const b = this.buf;
    const p = this.pos;
    const i = p >>> 3;
    const sh = p & 7;
    let w = (b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24)) >>> sh;
    if (sh !== 0) w |= b[i + 4]! << (32 - sh);
    return w >>> 0;
  }

  /** Advances by n bits, failing if that passes the end. */
  skip(n: number): void {
    if ((this.pos += n) > this.len) {
      this.pos = this.len;
      throw new ReplicaDecodeError("truncated", "ends early", this.pos);
    }
  }

  /** Reads n ≤ 32 bits, unsigned. */
  bits(n: number): number {
    if (n === 0) return 0;
    const w = this.peek32();
    this.skip(n);
    return n === 32 ? w : (w & MASK32[n]!) >>> 0;
  }

  /** Reads one bit as a boolean. */
  bool(): boolean {
    return !!this.bits(1);
  }

  /** Reads n ≤ 64 bits: returns the low 32, leaves the high 32 in {@link hi}. */
  bitsWide(n: number): number {
    const lo = this.bits(Math.min(n, 32));
    this.hi = n > 32 ? this.bits(n - 32) : 0;
    return lo;
  }

  /** Reads a U(k) code (§1.2): returns the low 32 bits, leaves the high 32 in {@link hi}. */
  u(k: number): number {
    const w = this.peek32();
    if ((w & 1) === 0) {
      if (k <= 31) {
        this.skip(k + 1);
        this.hi = 0;
        return ((w >>> 1) & MASK32[k]!) >>> 0;
      }
    } else if (w !== 0xffffffff) {
      const ones = ctz(~w);
      const b = k + ones;
      if (ones + b <= 32 && b <= 32) {
        this.skip(ones + b);
        this.hi = 0;
        // b − 1 value bits under an implicit leading 1: an OR, in 32-bit ints.
        return (((w >>> (ones + 1)) & MASK32[b - 1]!) | (1 << (b - 1))) >>> 0;
      }
    }
    return this.uSlow(k);
  }

  // Codes the fast path does not take: more than 32 bits with the ones, or
  // k ≥ 32; a bit at a time. (k is at most 63: a bits(6) or a constant.)
  private uSlow(k: number): number {
    let ones = 0;
    while (ones < 64 - k && this.bits(1)) ones++;
    // b value bits under an implicit leading 1 at bit b, or k bits.
    const b = k + ones - 1;
    const lo = this.bitsWide(ones ? b : k);
    if (!ones) return lo;
    if (b < 32) return lo + 2 ** b;
    this.hi = (this.hi | (1 << (b - 32))) >>> 0;
    return lo;
  }

  /** Reads a U(k) value that must fit 32 bits. */
  u32(k = 0): number {
    const v = this.u(k);
    return this.hi ? this.malformed("over 32 bits") : v;
  }

  /** Reads a U(k) value as a BigInt. */
  uBig(k: number): bigint {
    return big(this.u(k), this.hi);
  }

  /**
   * Reads a U(k) count and checks it against max and against the bits left,
   * assuming each counted item takes at least minBits bits.
   */
  count(k: number, max: number, minBits: number, what: string): number {
    const start = this.pos;
    const n = this.u(k);
    if (this.hi || n > max) throw new ReplicaDecodeError("limit", `${what} ${n} > ${max}`, start);
    if (n * minBits > this.len - this.pos) throw new ReplicaDecodeError("truncated", `${what} ${n}`, start);
    return n;
  }

  /** Reads a length-prefixed byte string of at most max bytes (§1.4): a view of the input when aligned, else a copy. */
  private str(max: number): Uint8Array {
    const n = this.count(4, max, 8, "length");
    const i = this.pos >>> 3;
    if (this.pos & 7) return Uint8Array.from({ length: n }, () => this.bits(8));
    this.skip(n * 8);
    return this.buf.subarray(i, i + n);
  }

  /** Reads a length-prefixed byte string of at most max bytes (§1.4) into a new array. */
  bytes(max: number): Uint8Array {
    return this.str(max).slice();
  }

  /** Reads a length-prefixed string of at most max bytes, decoded as UTF-8 (non-fatal). */
  string(max: number): string {
    return decodeUTF8(this.str(max));
  }

  /** Requires that only zero padding (fewer than 8 bits) is left. */
  finish(): void {
    const rem = this.len - this.pos;
    if (rem >= 8 || this.bits(rem) !== 0) this.malformed("trailing");
  }
}

/**
 * Writes a bit stream (the inverse of {@link BitReader}). It writes HELLOs
 * and RPC arguments, not ticks: a bit at a time.
 */
export class BitWriter {
  private buf: Uint8Array = new Uint8Array(64);
  /** Bits written. */
  pos = 0;

  /** Writes the low n ≤ 32 bits of v (n up to 64 for v = −1: all ones). */
  bits(v: number, n: number): void {
    for (let i = 0; i < n; i++, this.pos++) {
      const j = this.pos >>> 3;
      if (j === this.buf.length) this.buf = cat(this.buf, new Uint8Array(j));
      this.buf[j]! |= ((v >>> i) & 1) << (this.pos & 7);
    }
  }

  /** Writes n ≤ 64 bits of the value with halves lo, hi. */
  bitsWide(lo: number, hi: number, n: number): void {
    this.bits(lo, Math.min(n, 32));
    this.bits(hi, n - 32);
  }

  bool(b: boolean): void {
    this.bits(+b, 1);
  }

  /** Writes the U(k) code of the value with halves lo, hi (§1.2); lo may be any integer below 2^53 when hi is 0. */
  u(lo: number, k: number, hi = 0): void {
    if (lo > 0xffffffff) {
      hi = Math.floor(lo / 2 ** 32);
      lo %= 2 ** 32;
    }
    hi >>>= 0;
    const b = hi ? 64 - Math.clz32(hi) : 32 - Math.clz32(lo);
    // b − k ones and a 0 (none after 64 − k ones), then the low b − 1 bits
    // (the top one implied); or a 0 and k bits.
    const ones = b > k ? b - k : 0;
    this.bits(-1, ones);
    if (ones < 64 - k) this.bits(0, 1);
    this.bitsWide(lo, hi, ones ? b - 1 : k);
  }

  /** Writes the U(k) code of a BigInt in 0..2^64−1. */
  uBig(v: bigint, k: number): void {
    this.u(Number(v & 0xffffffffn), k, Number((v >> 32n) & 0xffffffffn));
  }

  /** Writes a length-prefixed byte string. */
  bytes(b: Uint8Array): void {
    this.u(b.length, 4);
    for (const x of b) this.bits(x, 8);
  }

  /** Writes a string as UTF-8 bytes. */
  string(s: string): void {
    this.bytes(encodeUTF8(s));
  }

  /** Returns the bytes written, padded with zero bits to a byte boundary. */
  finish(): Uint8Array {
    return this.buf.slice(0, (this.pos + 7) >>> 3);
  }
}

/** zigzag on 64 bits as BigInt. */
export function zigzagBig(v: bigint): bigint {
  v = BigInt.asIntN(64, v);
  return BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
}

/** unzigzag on 64 bits as BigInt. */
export function unzigzagBig(u: bigint): bigint {
  return BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n));
}

/** Appends n as an unsigned LEB128 varint to out; returns out. */
export function leb128(out: number[], n: number): number[] {
  for (; n > 127; n = Math.floor(n / 128)) out.push((n & 127) | 128);
  out.push(n);
  return out;
}

/** The bytes of a followed by those of b. */
export function cat(a: ArrayLike<number>, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** Compares byte strings bytewise (a shorter prefix first). */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/** The unsigned 64-bit integer of halves lo, hi. */
export const big = (lo: number, hi: number): bigint => (BigInt(hi) << 32n) | BigInt(lo);
