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

import { MASK } from "./bits.js";
import { isSigned, kindWidth, type Type } from "./schema.js";
import { Kind } from "./enums.js";

/** How a numeric type is coded (§4.3), resolved once per type. */
export interface NumPlan {
  kind: number;
  /** Raw bits in full mode, or 0 if the full mode is a U(k) code. */
  fullRaw: number;
  /** Raw bits in delta mode (bool: 1), or 0 if U(k). */
  deltaRaw: number;
  /** Delta width D (§4.3). */
  D: number;
  /** Full-mode range width W (values must fit W bits). */
  W: number;
  /** The full-mode code is zigzagged (signed kinds, unbounded quantization). */
  zigzag: boolean;
  /** S is sign-extended from D bits after a delta (signed kinds). */
  signed: boolean;
  /** S may need more than 32 bits: elements are BigInts. */
  wide: boolean;
  /** Elements of a narrow signed kind are read as int32. */
  narrowSigned: boolean;
  quant: Type["quant"];
}

const plans = new WeakMap<Type, NumPlan>();

/** The numeric plan of type t (a numeric kind). */
export function numPlan(t: Type): NumPlan {
  let p = plans.get(t);
  if (p) return p;
  const k = t.kind;
  const q = t.quant;
  let fullRaw = 0;
  let D = kindWidth(k);
  let W = kindWidth(k);
  let zigzag = isSigned(k);
  let wide = W === 64;
  if (k === Kind.Bool) fullRaw = 1;
  if (k === Kind.Float32 || k === Kind.Float64) {
    if (q.mode === 0) fullRaw = W;
    else if (q.mode === 2) {
      fullRaw = q.nbits;
      D = q.nbits;
      W = q.nbits;
      wide = false;
    } else {
      D = 64;
      W = 64;
      zigzag = true;
      wide = true;
    }
  }
  p = {
    kind: k,
    fullRaw,
    deltaRaw: k === Kind.Bool ? 1 : 0,
    D,
    W,
    zigzag,
    signed: isSigned(k) || (q.mode === 1 && (k === Kind.Float32 || k === Kind.Float64)),
    wide,
    narrowSigned: isSigned(k) && !wide,
    quant: q,
  };
  plans.set(t, p);
  return p;
}

/**
 * Scratch output of the decode helpers: the stored value's halves.
 * (Module-level to keep the hot paths free of allocation.)
 */
export const out = { lo: 0, hi: 0 };

/**
 * Decodes a full-mode U(k) code (lo, hi) of plan p into out (§4.3).
 * Returns false when the value is out of range for the kind.
 */
export function decodeFull(p: NumPlan, lo: number, hi: number): boolean {
  if (p.W < 64 && (hi !== 0 || lo > MASK[p.W]!)) return false;
  if (!p.zigzag) {
    out.lo = lo;
    out.hi = hi;
    return true;
  }
  unzigzag64(lo, hi);
  return true;
}

/** out = unzigzag(lo, hi) on 64 bits, as halves. */
export function unzigzag64(lo: number, hi: number): void {
  let dlo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
  let dhi = hi >>> 1;
  if (lo & 1) {
    dlo = ~dlo >>> 0;
    dhi = ~dhi >>> 0;
  }
  out.lo = dlo;
  out.hi = dhi;
}

/**
 * Applies a delta-mode U(k) code (lo, hi) of plan p to the stored value
 * (olo, ohi), into out. Returns false when the code is not a canonical
 * delta (§4.3) or, for refs, the value does not fit 32 bits.
 */
export function decodeDelta(p: NumPlan, olo: number, ohi: number, lo: number, hi: number): boolean {
  if (p.kind === Kind.Ref) {
    if (hi !== 0) return false;
    out.lo = lo;
    out.hi = 0;
    return true;
  }
  const D = p.D;
  if (D <= 32) {
    if (hi !== 0 || lo > MASK[D]!) return false;
    const d = (lo >>> 1) ^ -(lo & 1);
    let v = olo + d;
    if (p.signed) {
      v = D === 32 ? v | 0 : ((v << (32 - D)) >> (32 - D));
      out.lo = v >>> 0;
      out.hi = v < 0 ? 0xffffffff : 0;
    } else {
      out.lo = D === 32 ? v >>> 0 : (v & MASK[D]!) >>> 0;
      out.hi = 0;
    }
    return true;
  }
  unzigzag64(lo, hi);
  const s = olo + out.lo;
  out.hi = (ohi + out.hi + (s > 0xffffffff ? 1 : 0)) >>> 0;
  out.lo = s >>> 0;
  return true;
}

/** The element form of a stored value: a number for narrow kinds, a BigInt for wide ones. */
export function toElem(p: NumPlan, lo: number, hi: number): number | bigint {
  if (!p.wide) return p.narrowSigned ? lo | 0 : lo;
  const v = (BigInt(hi) << 32n) | BigInt(lo);
  return p.signed ? BigInt.asIntN(64, v) : v;
}

/** Splits an element-form value into out. */
export function fromElem(v: number | bigint): void {
  if (typeof v === "number") {
    out.lo = v >>> 0;
    out.hi = v < 0 ? 0xffffffff : 0;
    return;
  }
  const u = BigInt.asUintN(64, v);
  out.lo = Number(u & 0xffffffffn);
  out.hi = Number(u >> 32n);
}

const F32 = new Float32Array(1);
const F32_U32 = new Uint32Array(F32.buffer);
const F64 = new Float64Array(1);
const F64_U32 = new Uint32Array(F64.buffer);

/** Reinterprets 32 bits as a float32. */
export function f32FromBits(lo: number): number {
  F32_U32[0] = lo;
  return F32[0]!;
}

/** Reinterprets 64 bits as a float64. */
export function f64FromBits(lo: number, hi: number): number {
  F64_U32[0] = lo;
  F64_U32[1] = hi;
  return F64[0]!;
}

/** The IEEE bits of a float32. */
export function f32Bits(x: number): number {
  F32[0] = x;
  return F32_U32[0]!;
}

/** The IEEE bits of a float64, into out. */
export function f64Bits(x: number): void {
  F64[0] = x;
  out.lo = F64_U32[0]!;
  out.hi = F64_U32[1]!;
}

/**
 * The float64 a quantized code stands for (§4.2), before any float32
 * rounding: min + (c × step) for bounded (the product rounded first; JS
 * never fuses), c × step for unbounded, c being S as int64.
 */
export function dequantize(p: NumPlan, lo: number, hi: number): number {
  const q = p.quant;
  if (q.mode === 2) return q.min + lo * q.step;
  const c = (hi | 0) * 4294967296 + lo; // one rounding, as float64(int64)
  return c * q.step;
}

/** The JS value of a stored numeric value (§4.1): what accessors and callbacks see. */
export function numValue(p: NumPlan, lo: number, hi: number): number | bigint | boolean {
  switch (p.kind) {
    case Kind.Bool:
      return lo !== 0;
    case Kind.Int8:
    case Kind.Int16:
    case Kind.Int32:
      return lo | 0;
    case Kind.Uint8:
    case Kind.Uint16:
    case Kind.Uint32:
    case Kind.Ref:
      return lo;
    case Kind.Int64:
      return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
    case Kind.Uint64:
      return (BigInt(hi) << 32n) | BigInt(lo);
    case Kind.Float32:
      if (p.quant.mode !== 0) return Math.fround(dequantize(p, lo, hi));
      return f32FromBits(lo);
    case Kind.Float64:
      if (p.quant.mode !== 0) return dequantize(p, lo, hi);
      return f64FromBits(lo, hi);
  }
  return lo;
}
