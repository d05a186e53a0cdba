/**
 * Numeric values (docs/protocol.md §4): the stored representation S, the
 * full and delta modes, and dequantization.
 *
 * S is held as two unsigned 32-bit halves (lo, hi). Signed kinds are
 * sign-extended to 64 bits, so a negative int8 has hi = 0xffffffff.
 * Container elements and keys hold S as a JS number when S fits 32 bits
 * (narrow kinds: number, sign-extended for signed kinds) and as a BigInt
 * otherwise (int64, uint64, float64 bits, unbounded quantization codes).
 */

import { MASK, big } from "./bits.js";
import { isSigned, kindWidth, type Type } from "./schema.js";
import { Kind } from "./enums.js";

/** How a numeric type is coded (§4.3), resolved once per type. */
export interface NumPlan {
  kind: number;
  /** Raw bits in full mode, or 0 if the full mode is a U(k) code. */
  fullRaw: number;
  /** Raw bits in delta mode (bool: 1), or 0 if U(k). */
  deltaRaw: number;
  /** The full-mode range width W (values must fit W bits), which is the delta width D (§4.3). */
  W: number;
  /**
   * S is signed: the full-mode code is zigzagged, and S sign-extended from
   * D bits after a delta (signed kinds, unbounded quantization).
   */
  signed: boolean;
  /** S may need more than 32 bits: elements are BigInts. */
  wide: boolean;
  quant: Type["quant"];
}

const plans = new WeakMap<Type, NumPlan>();

/** The numeric plan of type t (a numeric kind). */
export const numPlan = (t: Type): NumPlan => {
  let p = plans.get(t);
  if (!p) {
    const k = t.kind;
    const q = t.quant;
    const m = q.mode;
    const float = k === Kind.Float32 || k === Kind.Float64;
    // Bounded quantization: nbits; unbounded: a zigzagged int64; none: the kind's width.
    const W = float && m ? (m > 1 ? q.nbits : 64) : kindWidth(k);
    const bool = +(k === Kind.Bool);
    plans.set(t, (p = { kind: k, fullRaw: bool || (float && m !== 1 ? W : 0), deltaRaw: bool, W, signed: isSigned(k) || (float && m === 1), wide: W === 64, quant: q }));
  }
  return p;
};

/**
 * Scratch output of the decode helpers: the stored value's halves.
 * (Module-level to keep the hot paths free of allocation.)
 */
export const out = { lo: 0, hi: 0 };

/** out = unzigzag(lo, hi) on 64 bits, as halves. */
const unzigzag64 = (lo: number, hi: number): void => {
  const neg = -(lo & 1);
  out.lo = (((lo >>> 1) | ((hi & 1) << 31)) ^ neg) >>> 0;
  out.hi = ((hi >>> 1) ^ neg) >>> 0;
};

/**
 * Decodes a full-mode U(k) code (lo, hi) of plan p into out (§4.3).
 * Returns false when the value is out of range for the kind.
 */
export const decodeFull = (p: NumPlan, lo: number, hi: number): boolean => {
  if (p.W < 64 && (hi || lo > MASK[p.W]!)) return false;
  if (p.signed) unzigzag64(lo, hi);
  else {
    out.lo = lo;
    out.hi = hi;
  }
  return true;
};

/**
 * Applies a delta-mode U(k) code (lo, hi) of plan p to the stored value
 * (olo, ohi), into out: a ref's (a new value, which must fit 32 bits), or
 * a 64-bit number's (the decoder adds deltas of D ≤ 32 itself). Returns
 * false when the value does not fit.
 */
export const decodeDelta = (p: NumPlan, olo: number, ohi: number, lo: number, hi: number): boolean => {
  if (p.kind === Kind.Ref) {
    out.lo = lo;
    out.hi = 0;
    return !hi;
  }
  unzigzag64(lo, hi);
  const s = olo + out.lo;
  out.hi = (ohi + out.hi + +(s > 0xffffffff)) >>> 0;
  out.lo = s >>> 0;
  return true;
};

/** The element form of a stored value: a number for narrow kinds, a BigInt for wide ones. */
export const toElem = (p: NumPlan, lo: number, hi: number): number | bigint => {
  if (!p.wide) return p.signed ? lo | 0 : lo;
  const v = big(lo, hi);
  return p.signed ? BigInt.asIntN(64, v) : v;
};

const F32 = new Float32Array(1);
const F32_U32 = new Uint32Array(F32.buffer);
const F64 = new Float64Array(1);
const F64_U32 = new Uint32Array(F64.buffer);

/** Reinterprets 32 bits as a float32. */
export const f32FromBits = (lo: number): number => {
  F32_U32[0] = lo;
  return F32[0]!;
};

/** Reinterprets 64 bits as a float64. */
export const f64FromBits = (lo: number, hi: number): number => {
  F64_U32[0] = lo;
  F64_U32[1] = hi;
  return F64[0]!;
};

/** The IEEE bits of a float32. */
export const f32Bits = (x: number): number => {
  F32[0] = x;
  return F32_U32[0]!;
};

/** The IEEE bits of a float64, into out. */
export const f64Bits = (x: number): void => {
  F64[0] = x;
  out.lo = F64_U32[0]!;
  out.hi = F64_U32[1]!;
};

/**
 * The float64 a quantized code stands for (§4.2), before any float32
 * rounding: min + (c × step) for bounded (the product rounded first; JS
 * never fuses), c × step for unbounded, c being S as int64.
 */
export const dequantize = (p: NumPlan, lo: number, hi: number): number => {
  const q = p.quant;
  return q.mode === 2 ? q.min + lo * q.step : ((hi | 0) * 4294967296 + lo) * q.step; // one rounding, as float64(int64)
};

/** The JS value of a stored numeric value (§4.1): what accessors and callbacks see. */
export const numValue = (p: NumPlan, lo: number, hi: number): number | bigint | boolean => {
  const k = p.kind;
  if (k === Kind.Bool) return lo !== 0;
  if (k === Kind.Float32) return p.quant.mode ? Math.fround(dequantize(p, lo, hi)) : f32FromBits(lo);
  if (k === Kind.Float64) return p.quant.mode ? dequantize(p, lo, hi) : f64FromBits(lo, hi);
  return toElem(p, lo, hi);
};
