/**
 * Encoding of standalone records (docs/protocol.md §6.1 record(T)): the
 * arguments of client→server RPCs (§10.2). Values are given as plain JS
 * values keyed by field name; absent fields are zero.
 */

import { begin, bitLen, encodeUTF8, put, putBytes, putU, putWide, split64, written } from "./bits.js";
import { isNumeric, kindType, type StructType, type Type } from "./schema.js";
import { compareKeys } from "./state.js";
import { f32Bits, f64Bits, numPlan, out } from "./values.js";
import { Kind } from "./enums.js";

/** Rounds half away from zero (Go's math.Round). */
const roundHalfAway = (x: number): number => (x < 0 ? -Math.round(-x) : Math.round(x));

/** Sets out to the 64-bit two's complement of integer b. */
const split = (b: bigint): void =>
  split64(b, (lo, hi) => {
    out.lo = lo;
    out.hi = hi;
  });

/** The stored representation S (§4.1) of JS value v for numeric type t, into out; a RangeError if v does not fit. */
export const toStored = (t: Type, v: unknown): void => {
  const k = t.kind;
  const q = t.quant;
  out.hi = 0;
  if (k === Kind.Bool) {
    out.lo = v ? 1 : 0;
    return;
  }
  let x = Number(v ?? 0);
  if (k === Kind.Float32 || k === Kind.Float64) {
    if (k === Kind.Float32) x = Math.fround(x);
    if (q.mode === 0) {
      if (k === Kind.Float32) out.lo = f32Bits(x);
      else f64Bits(x);
    } else if (Number.isNaN(x)) out.lo = 0;
    // The code of the bounded quantization (§4.2), clamped to 0..2^nbits − 1.
    else if (q.mode === 2) out.lo = Math.max(0, Math.min(roundHalfAway((x - q.min) / q.step), 2 ** q.nbits - 1));
    else split(BigInt(Math.max(-(2 ** 62), Math.min(2 ** 62, roundHalfAway(x / q.step)))));
  } else {
    const n = typeof v === "bigint" ? v : Number.isInteger(x) ? BigInt(x) : undefined;
    const p = numPlan(t);
    const top = 1n << BigInt(p.W - +p.signed);
    if (n === undefined || n >= top || n < (p.signed ? -top : 0n)) throw new RangeError(`${v} is not an integer of ${p.W} bits`);
    split(n);
  }
};

/** A number's full-mode code (§4.3): raw bits (k −1, n the width), or a U(k) code with k its bit length. */
interface Code {
  lo: number;
  hi: number;
  k: number;
  n: number;
}

const code = (t: Type, v: unknown): Code => {
  toStored(t, v);
  const p = numPlan(t);
  let { lo, hi } = out;
  if (p.fullRaw) return { lo, hi, k: -1, n: p.fullRaw };
  if (p.signed) {
    // zigzag on 64 bits: (v << 1) ^ (v >> 63)
    const neg = hi >> 31;
    hi = (((hi << 1) | (lo >>> 31)) ^ neg) >>> 0;
    lo = ((lo << 1) ^ neg) >>> 0;
  }
  return { lo, hi, k: Math.min(bitLen(lo, hi), 63), n: 0 };
};

const bytesOf = (v: unknown): Uint8Array => (v instanceof Uint8Array ? v : encodeUTF8(String(v ?? "")));

/** The entries of a Map or an object (maps and bags). */
const entries = (v: unknown): [unknown, unknown][] => (v instanceof Map ? [...v] : v && typeof v === "object" ? Object.entries(v) : []);

/** Whether v is the zero value of type t (a nested struct: every field zero). */
const zero = (t: Type, v: any): boolean => {
  const k = t.kind;
  if (v == null) return true;
  if (k === Kind.Nested) return t.struct!.fields.every((f) => f.deprecated || zero(f.type, v[f.name]));
  if (isNumeric(k)) {
    toStored(t, v);
    return !out.lo && !out.hi;
  }
  return !(k === Kind.List ? v : k <= Kind.Bytes ? bytesOf(v) : entries(v)).length;
};

/**
 * Writes the shared k of values of type t (§6.1) when they are U(k)-coded
 * numbers, and returns a function that writes value i.
 */
const elems = (t: Type, vals: unknown[]): (i: number) => void => {
  if (!isNumeric(t.kind)) return (i) => value(t, vals[i]);
  const cs = vals.map((v) => code(t, v));
  const k = Math.max(0, ...cs.map((c) => c.k));
  if (cs[0] && cs[0].k >= 0) put(k, 6);
  return (i) => {
    const c = cs[i]!;
    c.k < 0 ? putWide(c.lo, c.hi, c.n) : putU(c.lo, k, c.hi);
  };
};

/** Writes a value that is not a number of a record: a string, bytes, a container or a struct element. */
const value = (t: Type, v: any): void => {
  const k = t.kind;
  if (k === Kind.Nested) return record(t.struct!, v);
  if (k <= Kind.Bytes) return putBytes(bytesOf(v));
  // Lists; maps and bags with their keys as the decoder holds them,
  // ascending (§6.1): the keys' shared k, the values', and each key and value.
  const list = k === Kind.List;
  const es = list ? ((v ?? []) as unknown[]).map((x) => [0, x] as const) : entries(v).map(([key, x]) => [t.key === Kind.String ? String(key) : BigInt(key as number), x] as const).sort((a, b) => compareKeys(a[0], b[0]));
  putU(es.length, 4);
  if (!es.length) return;
  const ek = list ? () => {} : elems(kindType(t.key), es.map((e) => e[0]));
  const ev = k === Kind.Bag ? (i: number) => record(t.struct!, es[i]![1]) : elems(t.elem!, es.map((e) => e[1]));
  es.forEach((_, i) => (ek(i), ev(i)));
};

/**
 * Writes the field tree of st's non-zero leaves (§5.5), each U(k)-coded
 * number with k = its code's bit length; the writers of the values (of
 * one value each, value 0) go to later, to be run after the whole tree.
 */
const tree = (st: StructType, v: any, later: ((i: number) => void)[]): void => {
  const fs = st.fields.filter((f) => !f.deprecated && !zero(f.type, v[f.name]));
  putU(fs.length, 2);
  let prev = 0;
  for (const f of fs) {
    const x = v[f.name];
    const t = f.type;
    putU(f.id - prev - 1, 2);
    prev = f.id;
    // A value alone: a U(k)-coded number's k is its code's bit length.
    if (t.kind === Kind.Nested) tree(t.struct!, x, later);
    else later.push(elems(t, [x]));
  }
};

const record = (st: StructType, v: any): void => {
  const later: ((i: number) => void)[] = [];
  tree(st, v ?? {}, later);
  later.forEach((f) => f(0));
};

/** Whether v is an object that may hold a struct's fields or a map's entries: not null nor an array. */
const isObject = (v: unknown): boolean => !!v && typeof v === "object" && !Array.isArray(v);

/**
 * Checks that value v of type t (of kind k: a bag's t with k Nested is one
 * of its items), at path at ("Fire.pos.x", "Aim.tags[2]"), has the JS type
 * encodeRecord takes, and so its fields, elements and values: a wrong one
 * is a TypeError, an integer out of its type's range a RangeError, both
 * naming at. (The encoder would turn "50" into 50 and null into 0.)
 * Map keys are not checked: the encoder converts them.
 */
const check = (t: Type, v: any, at: string, k = t.kind): void => {
  const T = typeof v;
  const big = k === Kind.Int64 || k === Kind.Uint64;
  const want =
    k === Kind.Bool ? "boolean"
    : k === Kind.String ? "string"
    : k === Kind.Bytes ? "Uint8Array"
    : k === Kind.Nested ? "object"
    : k === Kind.List ? "array"
    : k > Kind.List ? "Map or object"
    : big ? "number or bigint"
    : "number";
  if (!(k === Kind.Bytes ? v instanceof Uint8Array : k === Kind.List ? Array.isArray(v) : k >= Kind.Nested ? isObject(v) : big ? T === "number" || T === "bigint" : T === want)) {
    const got = Array.isArray(v) ? "array" : v && T === "object" ? T : T === "string" ? JSON.stringify(v) : T === "bigint" ? v + "n" : String(v);
    throw new TypeError(`replica: ${at}: expected ${want}, got ${got}`);
  }
  // A struct's fields that v does not have, or has as undefined (as an
  // optional property of TypeScript, which JSON leaves out), are zero.
  if (k === Kind.Nested) for (const f of t.struct!.fields) !f.deprecated && v[f.name] !== undefined && check(f.type, v[f.name], at + "." + f.name);
  else if (k === Kind.List) v.forEach((x: unknown, i: number) => check(t.elem!, x, `${at}[${i}]`));
  else if (k > Kind.List) for (const [key, x] of entries(v)) check(k === Kind.Bag ? t : t.elem!, x, `${at}[${key}]`, k === Kind.Bag ? Kind.Nested : undefined);
  else if (isNumeric(k)) {
    try {
      toStored(t, v);
    } catch (e) {
      throw new RangeError(`replica: ${at}: ${(e as Error).message}`);
    }
  }
};

/**
 * Encodes a standalone record of struct st (§6.1): the tree of its
 * non-zero leaves, each U(k)-coded leaf with k = its code's bit length,
 * then the values. v maps field names to values: numbers (or BigInts for
 * 64-bit integers), booleans, strings, Uint8Array for bytes, objects for
 * nested structs, arrays for lists, Map or object for maps and bags (an
 * object's keys, strings, as decimal integers for integer keys).
 *
 * A field v does not have, or has as undefined (an optional property
 * left out), is the zero value; keys of v the struct has no field for are
 * ignored. A value of the wrong JS type (a string "50" for a number, null
 * for anything) throws
 * a TypeError naming the struct and the field ("Fire.pos.x"), an integer
 * out of its type's range a RangeError, before anything is encoded. NaN
 * and ±Infinity are legal for float fields (IEEE 754 values, which a
 * quantized field clamps): the server's RPC handler must validate them.
 */
export const encodeRecord = (st: StructType, v: Record<string, unknown>): Uint8Array => {
  check({ struct: st } as Type, v, st.name, Kind.Nested); // (check reads a Nested type's struct alone)
  begin();
  record(st, v);
  return written();
};
