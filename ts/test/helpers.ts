import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { Kind, type Schema, type StructType } from "../src/schema.js";
import { BagC, ListC, MapC, Rec, type Elem, type Entity, type Key } from "../src/state.js";
import { dequantize, f32FromBits, f64FromBits, numPlan } from "../src/values.js";
import type { Type } from "../src/schema.js";

export const vectorDir = join(dirname(fileURLToPath(import.meta.url)), "../../testdata/vectors");

export interface VectorFile {
  name: string;
  description: string;
  view: "others" | "owner";
  descriptor: string;
  ticks: { segments: string[]; state: { id: number; class: string; fields: Record<string, unknown> }[] }[];
}

/** Every vector file, as codec/golden_test.go reads them: all *.json of testdata/vectors. */
export function loadVectors(): { file: string; v: VectorFile }[] {
  return readdirSync(vectorDir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((file) => ({ file, v: JSON.parse(readFileSync(join(vectorDir, file), "utf8")) as VectorFile }));
}

export function unhex(s: string): Uint8Array {
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function tohex(b: Uint8Array): string {
  return [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
}

/** A float32 value in a dump: compared after rounding the expected number to float32. */
export class F32 {
  constructor(readonly v: number) {}
}

function dumpFloat(x: number): unknown {
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "Infinity";
  if (x === -Infinity) return "-Infinity";
  return x;
}

/** The dump of a numeric stored value, as codec/golden_test.go's gvDumpNum. */
function dumpNum(t: Type, lo: number, hi: number): unknown {
  const p = numPlan(t);
  switch (t.kind) {
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
      return BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString();
    case Kind.Uint64:
      return ((BigInt(hi) << 32n) | BigInt(lo)).toString();
  }
  if (t.quant.mode !== 0) return dumpFloat(dequantize(p, lo, hi));
  if (t.kind === Kind.Float32) {
    const f = f32FromBits(lo);
    return Number.isFinite(f) ? new F32(f) : dumpFloat(f);
  }
  return dumpFloat(f64FromBits(lo, hi));
}

function split(v: Elem): [number, number] {
  if (typeof v === "bigint") {
    const u = BigInt.asUintN(64, v);
    return [Number(u & 0xffffffffn), Number(u >> 32n)];
  }
  const n = v as number;
  return [n >>> 0, n < 0 ? 0xffffffff : 0];
}

function dumpElem(t: Type, v: Elem): unknown {
  if (t.kind === Kind.Nested) return dumpFields(v as Rec, (v as Rec).type, 0, 0, false);
  if (t.kind === Kind.Bytes) return hex(v as Uint8Array);
  if (t.kind === Kind.String) return v;
  const [lo, hi] = split(v);
  return dumpNum(t, lo, hi);
}

const hex = (b: Uint8Array): string => [...b].map((x) => x.toString(16).padStart(2, "0")).join("");

function dumpKey(k: Key): string {
  return typeof k === "string" ? k : k.toString();
}

function dumpLeaf(r: Rec, leafIndex: number): unknown {
  const l = r.type.leaves[leafIndex]!;
  const t = l.field.type;
  if (l.num >= 0) return dumpNum(t, r.num[2 * l.num]!, r.num[2 * l.num + 1]!);
  const o = r.obj[l.obj];
  switch (t.kind) {
    case Kind.String:
      return o;
    case Kind.Bytes:
      return hex(o as Uint8Array);
    case Kind.List:
      return (o as ListC).items.map((v) => dumpElem(t.elem!, v));
    case Kind.Map: {
      const m = o as MapC;
      const out: Record<string, unknown> = {};
      for (const k of m.keys()) out[dumpKey(k)] = dumpElem(t.elem!, m.m.get(k)!);
      return out;
    }
    default: {
      const b = o as BagC;
      const out: Record<string, unknown> = {};
      for (const k of b.keys()) {
        const item = b.m.get(k)!;
        out[dumpKey(k)] = dumpFields(item, item.type, 0, 0, false);
      }
      return out;
    }
  }
}

/** gvDumpFields of codec/golden_test.go. */
export function dumpFields(r: Rec, st: StructType, base: number, vis: number, top: boolean): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of st.fields) {
    if (f.deprecated) continue;
    if (f.type.kind === Kind.Nested) {
      const sub = dumpFields(r, f.type.struct!, base + f.leaf, vis, top);
      if (Object.keys(sub).length > 0 || !top || ((f.vis & vis) !== 0 && f.type.struct!.leaves.length === 0)) {
        out[f.name] = sub;
      }
      continue;
    }
    const l = r.type.leaves[base + f.leaf]!;
    if (top && (l.vis & vis) === 0) continue;
    out[f.name] = dumpLeaf(r, base + f.leaf);
  }
  return out;
}

export function dumpEntity(e: Entity, vis: number): { id: number; class: string; fields: Record<string, unknown> } {
  return { id: e.id, class: e.type.name, fields: dumpFields(e, e.type, 0, vis, true) };
}

/** Compares a dump with the committed JSON; returns the first difference, or "". */
export function diff(got: unknown, want: unknown, path = "$"): string {
  if (got instanceof F32) {
    if (typeof want === "number" && Object.is(Math.fround(want), got.v)) return "";
    return `${path}: got float32 ${got.v}, want ${String(want)}`;
  }
  if (typeof got === "number" || typeof want === "number") {
    return Object.is(got, want) ? "" : `${path}: got ${String(got)}, want ${String(want)}`;
  }
  if (Array.isArray(got) || Array.isArray(want)) {
    if (!Array.isArray(got) || !Array.isArray(want) || got.length !== want.length) {
      return `${path}: got ${JSON.stringify(got, big)}, want ${JSON.stringify(want)}`;
    }
    for (let i = 0; i < got.length; i++) {
      const d = diff(got[i], want[i], `${path}[${i}]`);
      if (d) return d;
    }
    return "";
  }
  if (got && want && typeof got === "object" && typeof want === "object") {
    const gk = Object.keys(got).sort();
    const wk = Object.keys(want).sort();
    if (gk.join(",") !== wk.join(",")) return `${path}: keys ${gk.join(",")}, want ${wk.join(",")}`;
    for (const k of gk) {
      const d = diff((got as Record<string, unknown>)[k], (want as Record<string, unknown>)[k], `${path}.${k}`);
      if (d) return d;
    }
    return "";
  }
  return got === want ? "" : `${path}: got ${JSON.stringify(got, big)}, want ${JSON.stringify(want)}`;
}

const big = (_: string, v: unknown): unknown => (typeof v === "bigint" ? v.toString() + "n" : v);

export type { Schema };
