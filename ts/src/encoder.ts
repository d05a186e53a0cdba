/**
 * Encoding of standalone records (docs/protocol.md §6.1 record(T)): the
 * arguments of client→server RPCs (§10.2). Values are given as plain JS
 * values keyed by field name; absent fields are zero.
 */

import { BitWriter } from "./bits.js";
import { isNumeric, type StructType, type Type } from "./schema.js";
import { compareKeys } from "./state.js";
import { f32Bits, f64Bits, numPlan, out } from "./values.js";
import { Kind } from "./enums.js";

/** Rounds half away from zero (Go's math.Round). */
const roundHalfAway = (x: number): number => (x < 0 ? -Math.round(-x) : Math.round(x));

/** Quantizes v for a float type with quantization (§4.2) into out: the code c as S. */
function quantize(t: Type, v: number): void {
  const q = t.quant;
  if (t.kind === Kind.Float32) v = Math.fround(v);
  if (Number.isNaN(v)) {
    out.lo = out.hi = 0;
    return;
  }
  if (q.mode === 2) {
    const x = roundHalfAway((v - q.min) / q.step);
    const top = 2 ** q.nbits - 1;
    out.lo = !(x > 0) ? 0 : x > top ? top : x;
    out.hi = 0;
    return;
  }
  let x = roundHalfAway(v / q.step);
  if (x >= 2 ** 62) x = 2 ** 62;
  if (x <= -(2 ** 62)) x = -(2 ** 62);
  const b = BigInt.asUintN(64, BigInt(x));
  out.lo = Number(b & 0xffffffffn);
  out.hi = Number(b >> 32n);
}

function intRange(t: Type, v: unknown): bigint {
  if (typeof v === "bigint") return v;
  const n = Number(v ?? 0);
  if (!Number.isInteger(n)) throw new RangeError(`${String(v)} is not an integer`);
  return BigInt(n);
}

/** The stored representation S (§4.1) of JS value v for numeric type t, into out. */
export function toStored(t: Type, v: unknown): void {
  switch (t.kind) {
    case Kind.Bool:
      out.lo = v ? 1 : 0;
      out.hi = 0;
      return;
    case Kind.Float32:
    case Kind.Float64: {
      const x = Number(v ?? 0);
      if (t.quant.mode !== 0) return quantize(t, x);
      if (t.kind === Kind.Float32) {
        out.lo = f32Bits(x);
        out.hi = 0;
      } else f64Bits(x);
      return;
    }
  }
  const p = numPlan(t);
  let b = intRange(t, v);
  const W = p.W;
  const ok = p.zigzag ? b >= -(1n << BigInt(W - 1)) && b < 1n << BigInt(W - 1) : b >= 0n && b < 1n << BigInt(W);
  if (!ok) throw new RangeError(`${String(v)} out of range for ${t.kind === Kind.Ref ? "ref" : `a ${W}-bit integer`}`);
  b = BigInt.asUintN(64, b);
  out.lo = Number(b & 0xffffffffn);
  out.hi = Number(b >> 32n);
}

/** The full-mode U(k) code of S (lo, hi) for plan p, into out (zigzag for signed kinds and unbounded codes). */
function fullCode(t: Type, lo: number, hi: number): void {
  const p = numPlan(t);
  if (!p.zigzag) {
    out.lo = lo;
    out.hi = hi;
    return;
  }
  // zigzag on 64 bits: (v << 1) ^ (v >> 63)
  const neg = (hi & 0x80000000) !== 0;
  let zlo = (lo << 1) >>> 0;
  let zhi = ((hi << 1) | (lo >>> 31)) >>> 0;
  if (neg) {
    zlo = ~zlo >>> 0;
    zhi = ~zhi >>> 0;
  }
  out.lo = zlo;
  out.hi = zhi;
}

const bitLen = (lo: number, hi: number): number => (hi !== 0 ? 64 - Math.clz32(hi) : 32 - Math.clz32(lo));

interface Num {
  lo: number;
  hi: number;
}

function numOf(t: Type, v: unknown): Num {
  toStored(t, v);
  return { lo: out.lo, hi: out.hi };
}

function writeNum(w: BitWriter, t: Type, s: Num, k: number): void {
  const p = numPlan(t);
  if (p.fullRaw !== 0) return w.bitsWide(s.lo, s.hi, p.fullRaw);
  fullCode(t, s.lo, s.hi);
  w.u(out.lo, k, out.hi);
}

function codeLen(t: Type, s: Num): number {
  fullCode(t, s.lo, s.hi);
  return Math.min(bitLen(out.lo, out.hi), 63);
}

const isUCoded = (t: Type): boolean => isNumeric(t.kind) && numPlan(t).fullRaw === 0;

function bytesOf(t: Type, v: unknown): Uint8Array {
  if (v instanceof Uint8Array) return v;
  return new TextEncoder().encode(String(v ?? ""));
}

function entries(v: unknown): [unknown, unknown][] {
  if (v instanceof Map) return [...v.entries()];
  if (v && typeof v === "object") return Object.entries(v);
  return [];
}

function keyOf(kind: number, k: unknown): string | number | bigint {
  if (kind === Kind.String) return String(k);
  const t = { kind, quant: { mode: 0 as const, step: 0, min: 0, nbits: 0 }, struct: null, elem: null, key: 0 };
  const s = numOf(t, typeof k === "string" ? BigInt(k) : k);
  const p = numPlan(t);
  const b = (BigInt(s.hi) << 32n) | BigInt(s.lo);
  const v = p.zigzag ? BigInt.asIntN(64, b) : b;
  return p.wide ? v : Number(v);
}

function writeKey(w: BitWriter, kind: number, k: string | number | bigint, kk: number): void {
  if (kind === Kind.String) return w.string(k as string);
  const t = { kind, quant: { mode: 0 as const, step: 0, min: 0, nbits: 0 }, struct: null, elem: null, key: 0 };
  writeNum(w, t, numOf(t, k), kk);
}

function keyLen(kind: number, k: string | number | bigint): number {
  const t = { kind, quant: { mode: 0 as const, step: 0, min: 0, nbits: 0 }, struct: null, elem: null, key: 0 };
  return codeLen(t, numOf(t, k));
}

function isZero(t: Type, v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (isNumeric(t.kind)) {
    toStored(t, v);
    return out.lo === 0 && out.hi === 0;
  }
  switch (t.kind) {
    case Kind.String:
    case Kind.Bytes:
      return bytesOf(t, v).length === 0;
    case Kind.List:
      return (v as unknown[]).length === 0;
    case Kind.Map:
    case Kind.Bag:
      return entries(v).length === 0;
  }
  return false;
}

function writeElem(w: BitWriter, t: Type, v: unknown, k: number): void {
  if (isNumeric(t.kind)) return writeNum(w, t, numOf(t, v), k);
  if (t.kind === Kind.Nested) return writeRecord(w, t.struct!, (v ?? {}) as Record<string, unknown>);
  w.bytes(bytesOf(t, v));
}

function sharedK(t: Type, vals: unknown[]): number {
  let k = 0;
  for (const v of vals) k = Math.max(k, codeLen(t, numOf(t, v)));
  return k;
}

function writeContainer(w: BitWriter, t: Type, v: unknown): void {
  if (t.kind === Kind.List) {
    const a = (v ?? []) as unknown[];
    w.u(a.length, 4);
    const k = a.length > 0 && isUCoded(t.elem!) ? sharedK(t.elem!, a) : 0;
    if (a.length > 0 && isUCoded(t.elem!)) w.bits(k, 6);
    for (const x of a) writeElem(w, t.elem!, x, k);
    return;
  }
  const es = entries(v)
    .map(([k, x]) => [keyOf(t.key, k), x] as [string | number | bigint, unknown])
    .sort((a, b) => compareKeys(a[0], b[0]));
  w.u(es.length, 4);
  if (es.length === 0) return;
  const kk = t.key !== Kind.String ? Math.max(0, ...es.map(([k]) => keyLen(t.key, k))) : 0;
  if (t.key !== Kind.String) w.bits(kk, 6);
  if (t.kind === Kind.Map) {
    const k = isUCoded(t.elem!) ? sharedK(t.elem!, es.map(([, x]) => x)) : 0;
    if (isUCoded(t.elem!)) w.bits(k, 6);
    for (const [key, x] of es) {
      writeKey(w, t.key, key, kk);
      writeElem(w, t.elem!, x, k);
    }
    return;
  }
  for (const [key, x] of es) {
    writeKey(w, t.key, key, kk);
    writeRecord(w, t.struct!, (x ?? {}) as Record<string, unknown>);
  }
}

interface Leafy {
  t: Type;
  v: unknown;
  k: number;
}

/** Writes the tree of st's non-zero leaves and collects them in order. */
function writeTree(w: BitWriter, st: StructType, v: Record<string, unknown>, leaves: Leafy[]): boolean {
  const present: { id: number; sub?: Record<string, unknown>; leaf?: Leafy }[] = [];
  for (const f of st.fields) {
    if (f.deprecated) continue;
    const x = v[f.name];
    if (f.type.kind === Kind.Nested) {
      const sub = (x ?? {}) as Record<string, unknown>;
      const probe: Leafy[] = [];
      if (writeTree(new BitWriter(), f.type.struct!, sub, probe)) present.push({ id: f.id, sub });
      continue;
    }
    if (isZero(f.type, x)) continue;
    const k = isUCoded(f.type) ? codeLen(f.type, numOf(f.type, x)) : 0;
    present.push({ id: f.id, leaf: { t: f.type, v: x, k } });
  }
  w.u(present.length, 2);
  let prev = 0;
  for (const p of present) {
    w.u(p.id - prev - 1, 2);
    prev = p.id;
    if (p.sub) writeTree(w, st.field(p.id)!.type.struct!, p.sub, leaves);
    else {
      if (isUCoded(p.leaf!.t)) w.bits(p.leaf!.k, 6);
      leaves.push(p.leaf!);
    }
  }
  return present.length > 0;
}

function writeRecord(w: BitWriter, st: StructType, v: Record<string, unknown>): void {
  const leaves: Leafy[] = [];
  writeTree(w, st, v, leaves);
  for (const l of leaves) {
    if (isNumeric(l.t.kind)) writeNum(w, l.t, numOf(l.t, l.v), l.k);
    else if (l.t.kind === Kind.String || l.t.kind === Kind.Bytes) w.bytes(bytesOf(l.t, l.v));
    else writeContainer(w, l.t, l.v);
  }
}

/**
 * Encodes a standalone record of struct st (§6.1): the tree of its
 * non-zero leaves, each U(k)-coded leaf with k = its code's bit length,
 * then the values. v maps field names to values: numbers (BigInt for
 * 64-bit integers), booleans, strings, Uint8Array for bytes, objects for
 * nested structs, arrays for lists, Map or object for maps and bags.
 */
export function encodeRecord(st: StructType, v: Record<string, unknown>): Uint8Array {
  const w = new BitWriter();
  writeRecord(w, st, v);
  return w.finish();
}
