/**
 * A canonical, complete text form of a replica's state: every entity with
 * its ID, class, ownership, level and every stored value (numbers as their
 * stored representation). Two replicas with equal dumps hold the same
 * state; tests use it to check that a rejected tick changed nothing.
 */

import type { Type } from "./schema.js";

/** The kinds' names as §3.2 spells them: "invalid", "bool", "int8", … */
export const KIND_NAMES: readonly string[] = "invalid bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 string bytes ref nested list map bag".split(" ");
import { ListC, MapC, Rec, type Elem, type Entity } from "./state.js";

function hexBytes(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

function elemText(v: Elem | unknown): string {
  if (v instanceof Rec) return recText(v);
  if (v instanceof Uint8Array) return "x" + hexBytes(v);
  if (typeof v === "bigint") return v.toString() + "n";
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof ListC) return "[" + v.items.map(elemText).join(",") + "]";
  if (v instanceof MapC) return "{" + v.keys().map((k) => elemText(k) + ":" + elemText(v.m.get(k))).join(",") + "}";
  return String(v);
}

function recText(r: Rec): string {
  const nums: string[] = [];
  for (let i = 0; i < r.num.length; i += 2) nums.push(r.num[i + 1]!.toString(16) + ":" + r.num[i]!.toString(16));
  return `${r.type.name}(${nums.join(" ")}|${r.obj.map(elemText).join(" ")})`;
}

/** The canonical dump of entities. */
export function dumpEntities(ents: readonly Entity[]): string {
  return ents
    .map((e) => `${e.id.toString(16)} ${e.classId} owned=${e.owned} level=${e.level} alive=${e.alive} ${recText(e)}`)
    .join("\n");
}

/** A type as text: "int16", "float32 q(0.015625,-100,14)", "list<string>", "map<string,float64>", "bag<uint32,Item>". */
export function typeString(t: Type): string {
  const q = t.quant;
  const name = KIND_NAMES[t.kind] ?? `kind(${t.kind})`;
  if (q.mode !== 0) return `${name} q(${q.mode === 2 ? [q.step, q.min, q.nbits] : q.step})`;
  if (t.struct && !t.key) return t.struct.name;
  if (t.elem) return `${name}<${t.key ? KIND_NAMES[t.key] + "," : ""}${typeString(t.elem)}>`;
  return t.key ? `${name}<${KIND_NAMES[t.key]},${t.struct!.name}>` : name;
}
