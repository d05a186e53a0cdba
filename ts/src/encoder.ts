/**
 * Encoding of standalone records (docs/protocol.md §6.1 record(T)): the
 * arguments of client→server RPCs (§10.2). Values are given as plain JS
 * values keyed by field name; absent fields are zero.
 */

import { BitWriter, encodeUTF8 } from "./bits.js";
import { NO_QUANT, isNumeric, type StructType, type Type } from "./schema.js";
import { compareKeys, type Key } from "./state.js";
import { f32Bits, f64Bits, numPlan, out } from "./values.js";
import { Kind } from "./enums.js";

/** Rounds half away from zero (Go's math.Round). */
const roundHalfAway = (x: number): number => (x < 0 ? -Math.round(-x) : Math.round(x));

/** Sets out to the 64-bit two's complement of integer b. */
function split(b: bigint): void {
  const u = BigInt.asUintN(64, b);
  out.lo = Number(u & 0xffffffffn);
  out.hi = Number(u >> 32n);
}

/** The stored representation S (§4.1) of JS value v for numeric type t, into out. */
export function toStored(t: Type, v: unknown): void {
  const k = t.kind;
  const q = t.quant;
  out.hi = 0;
  if (k === Kind.Bool) {
    out.lo = v ? 1 : 0;
    return;
  }
  if (k === Kind.Float32 || k === Kind.Float64) {
    let x = Number(v ?? 0);
    if (k === Kind.Float32) x = Math.fround(x);
    if (q.mode === 0) {
      if (k === Kind.Float32) out.lo = f32Bits(x);
      else f64Bits(x);
    } else if (Number.isNaN(x)) out.lo = 0;
    else if (q.mode === 2) {
      // The code of the bounded quantization (§4.2), clamped to 0..2^nbits − 1.
      const c = roundHalfAway((x - q.min) / q.step);
      out.lo = c > 0 ? Math.min(c, 2 ** q.nbits - 1) : 0;
    } else split(BigInt(Math.max(-(2 ** 62), Math.min(2 ** 62, roundHalfAway(x / q.step)))));
    return;
  }
  let b: bigint;
  if (typeof v === "bigint") b = v;
  else {
    const n = Number(v ?? 0);
    if (!Number.isInteger(n)) throw new RangeError(`${String(v)} is not an integer`);
    b = BigInt(n);
  }
  const p = numPlan(t);
  const top = 1n << BigInt(p.W - +p.zigzag);
  if (b >= top || b < (p.zigzag ? -top : 0n)) throw new RangeError(`${String(v)} out of range for ${k === Kind.Ref ? "ref" : `a ${p.W}-bit integer`}`);
  split(b);
}

/** A leaf of a record with a non-zero value, and the code it is written as. */
interface Value {
  t: Type;
  v: unknown;
  /** Numbers: the full-mode code (lo, hi) and its U(k)'s k, or raw bits (k = −1). */
  lo: number;
  hi: number;
  k: number;
}

/** The full-mode code of value v of numeric type t (§4.3): raw bits, or a U(k) code with k its bit length. */
function code(t: Type, v: unknown): Value {
  toStored(t, v);
  const p = numPlan(t);
  let { lo, hi } = out;
  if (p.fullRaw) return { t, v, lo, hi, k: -1 };
  if (p.zigzag) {
    // zigzag on 64 bits: (v << 1) ^ (v >> 63)
    const neg = hi >> 31;
    hi = (((hi << 1) | (lo >>> 31)) ^ neg) >>> 0;
    lo = ((lo << 1) ^ neg) >>> 0;
  }
  return { t, v, lo, hi, k: Math.min(hi ? 64 - Math.clz32(hi) : 32 - Math.clz32(lo), 63) };
}

function writeNum(w: BitWriter, c: Value, k: number): void {
  if (c.k < 0) w.bitsWide(c.lo, c.hi, numPlan(c.t).fullRaw);
  else w.u(c.lo, k, c.hi);
}

const bytesOf = (v: unknown): Uint8Array => (v instanceof Uint8Array ? v : encodeUTF8(String(v ?? "")));

function entries(v: unknown): [unknown, unknown][] {
  if (v instanceof Map) return [...v.entries()];
  return v && typeof v === "object" ? Object.entries(v) : [];
}

function isZero(t: Type, v: unknown): boolean {
  if (v == null) return true;
  if (isNumeric(t.kind)) {
    toStored(t, v);
    return out.lo === 0 && out.hi === 0;
  }
  if (t.kind === Kind.String || t.kind === Kind.Bytes) return bytesOf(v).length === 0;
  return t.kind === Kind.List ? (v as unknown[]).length === 0 : entries(v).length === 0;
}

/** Writes n elements of type t: the shared k of U(k)-coded numbers first (§6.1), then each. */
function writeElems(w: BitWriter, t: Type, vals: unknown[]): void {
  if (!isNumeric(t.kind)) {
    for (const v of vals) {
      if (t.kind === Kind.Nested) writeRecord(w, t.struct!, v);
      else w.bytes(bytesOf(v));
    }
    return;
  }
  const cs = vals.map((v) => code(t, v));
  const k = Math.max(0, ...cs.map((c) => c.k));
  if (cs[0] && cs[0].k >= 0) w.bits(k, 6);
  for (const c of cs) writeNum(w, c, k);
}

function writeContainer(w: BitWriter, t: Type, v: unknown): void {
  if (t.kind === Kind.List) {
    const a = (v ?? []) as unknown[];
    w.u(a.length, 4);
    writeElems(w, t.elem!, a);
    return;
  }
  const kt: Type = { kind: t.key, quant: NO_QUANT, struct: null, elem: null, key: 0 };
  // Keys as the decoder holds them (numbers, BigInts for 64-bit kinds, strings), ascending (§6.1).
  const es = entries(v).map(([k, x]): [Key, unknown] => {
    if (t.key === Kind.String) return [String(k), x];
    toStored(kt, typeof k === "string" ? BigInt(k) : k);
    const b = (BigInt(out.hi) << 32n) | BigInt(out.lo);
    const s = numPlan(kt).zigzag ? BigInt.asIntN(64, b) : b;
    return [numPlan(kt).wide ? s : Number(s), x];
  });
  es.sort((a, b) => compareKeys(a[0], b[0]));
  w.u(es.length, 4);
  if (es.length === 0) return;
  const keys = es.map((e) => e[0]);
  const vals = es.map((e) => e[1]);
  if (t.kind === Kind.Bag) writeKeyed(w, kt, keys, vals, (x) => writeRecord(w, t.struct!, x));
  else writeKeyed(w, kt, keys, vals, null, t.elem!);
}

/**
 * Writes the entries of a whole map or bag: the keys' shared k (integer
 * keys), the values' shared k (U(k)-coded map values), then each key and
 * value.
 */
function writeKeyed(w: BitWriter, kt: Type, keys: Key[], vals: unknown[], item: ((x: unknown) => void) | null, et?: Type): void {
  const str = kt.kind === Kind.String;
  const kc = str ? [] : keys.map((k) => code(kt, k));
  const kk = Math.max(0, ...kc.map((c) => c.k));
  if (!str) w.bits(kk, 6);
  const vc = et && isNumeric(et.kind) ? vals.map((v) => code(et, v)) : null;
  const vk = vc ? Math.max(0, ...vc.map((c) => c.k)) : 0;
  if (vc && vc[0]!.k >= 0) w.bits(vk, 6);
  keys.forEach((k, i) => {
    if (str) w.bytes(encodeUTF8(k as string));
    else writeNum(w, kc[i]!, kk);
    if (item) item(vals[i]);
    else if (vc) writeNum(w, vc[i]!, vk);
    else writeElems(w, et!, [vals[i]]);
  });
}

/** The tree entries of st's non-zero leaves (§5.5); a nested struct with none is left out. */
interface Entry {
  id: number;
  sub?: Entry[];
  val?: Value;
}

function collect(st: StructType, v: Record<string, unknown>): Entry[] {
  const es: Entry[] = [];
  for (const f of st.fields) {
    const x = v[f.name];
    if (f.deprecated) continue;
    if (f.type.kind === Kind.Nested) {
      const sub = collect(f.type.struct!, (x ?? {}) as Record<string, unknown>);
      if (sub.length > 0) es.push({ id: f.id, sub });
    } else if (!isZero(f.type, x)) {
      es.push({ id: f.id, val: isNumeric(f.type.kind) ? code(f.type, x) : { t: f.type, v: x, lo: 0, hi: 0, k: -1 } });
    }
  }
  return es;
}

/** Writes a tree of entries, each U(k)-coded leaf with its k, and lists the leaves in order. */
function writeTree(w: BitWriter, es: Entry[], vals: Value[]): void {
  w.u(es.length, 2);
  let prev = 0;
  for (const e of es) {
    w.u(e.id - prev - 1, 2);
    prev = e.id;
    if (e.sub) writeTree(w, e.sub, vals);
    else {
      if (isNumeric(e.val!.t.kind) && e.val!.k >= 0) w.bits(e.val!.k, 6);
      vals.push(e.val!);
    }
  }
}

function writeRecord(w: BitWriter, st: StructType, v: unknown): void {
  const vals: Value[] = [];
  writeTree(w, collect(st, (v ?? {}) as Record<string, unknown>), vals);
  for (const c of vals) {
    const k = c.t.kind;
    if (isNumeric(k)) writeNum(w, c, c.k);
    else if (k === Kind.String || k === Kind.Bytes) w.bytes(bytesOf(c.v));
    else writeContainer(w, c.t, c.v);
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
