/**
 * The runtime side of the typed classes replicagen generates (replicagen
 * -ts): views over records, typed read-only containers, typed container
 * events, and the lookups generated modules run once when loaded. Game
 * code uses the generated classes; it rarely needs these directly.
 */

import { decodeDescriptor } from "./descriptor.js";
import type { Replica, BagEvent, ListEvent, MapEvent, ItemKind } from "./replica.js";
import type { Schema, StructType } from "./schema.js";
import { BagC, ListC, MapC, Rec, elemValue, type Elem, type Entity, type Key } from "./state.js";
import { numPlan, numValue, type NumPlan } from "./values.js";

/** A leaf of a struct as generated code reads it: its slots and numeric plan. */
export interface LeafRef {
  /** Leaf index in the struct. */
  i: number;
  num: number;
  obj: number;
  plan: NumPlan | null;
}

/** Decodes the base64 descriptor a generated module embeds. */
export function schemaFromBase64(b64: string): Schema {
  const s = atob(b64);
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  return decodeDescriptor(b);
}

/** Every struct type a schema reaches (classes, nested structs, elements, bag items, RPC arguments), by name. */
export function structsOf(schema: Schema): Map<string, StructType> {
  const out = new Map<string, StructType>();
  const visit = (s: StructType): void => {
    if (out.has(s.name)) return;
    out.set(s.name, s);
    for (const f of s.fields) {
      for (let t = f.type; t; t = t.elem!) {
        if (t.struct) visit(t.struct);
        if (!t.elem) break;
      }
    }
    for (const r of s.rpcs) visit(r.args);
  };
  for (const c of schema.classes) visit(c);
  return out;
}

/** The struct named name of schema; throws if the embedded descriptor lacks it. */
export function structNamed(structs: Map<string, StructType>, name: string): StructType {
  const s = structs.get(name);
  if (!s) throw new Error(`replica: generated code: the schema has no struct ${name}`);
  return s;
}

/** Leaf i of s, checked against the generated code's expectation of its dotted name. */
export function leafRef(s: StructType, i: number, name: string): LeafRef {
  const l = s.leaves[i];
  if (!l || l.name !== name) {
    throw new Error(`replica: generated code: leaf ${i} of ${s.name} is ${l?.name ?? "missing"}, want ${name}; regenerate it`);
  }
  return { i, num: l.num, obj: l.obj, plan: l.num >= 0 ? numPlan(l.field.type) : null };
}

/**
 * The slot offsets of the nested struct field whose first leaf is leaf i
 * of s: the numeric and object slots of the leaves before it (slots are
 * assigned in leaf order, §5.5).
 */
export function nestedAt(s: StructType, i: number, name: string): { num: number; obj: number } {
  const l = s.leaves[i];
  if (i > s.leaves.length || (l && !l.name.startsWith(name + "."))) {
    throw new Error(`replica: generated code: leaf ${i} of ${s.name} is ${l?.name ?? "missing"}, want a field of ${name}; regenerate it`);
  }
  let num = 0;
  let obj = 0;
  for (let j = 0; j < i; j++) {
    if (s.leaves[j]!.num >= 0) num++;
    else obj++;
  }
  return { num, obj };
}

/**
 * A view of a struct stored in a record at slot offsets (a nested struct
 * inline in its parent), or of a whole record (an entity, an element, a
 * bag item, RPC arguments). Generated classes extend it with getters.
 */
export class StructView {
  constructor(
    /** The record the values live in. */
    readonly rec$: Rec,
    /** Numeric and object slot offsets of the struct in rec$. */
    readonly num$ = 0,
    readonly obj$ = 0,
  ) {}

  /** The value of a numeric leaf. */
  protected n$(l: LeafRef): any {
    const i = (this.num$ + l.num) << 1;
    const a = this.rec$.num;
    return numValue(l.plan!, a[i]!, a[i + 1]!);
  }

  /** The value of a string, bytes or container leaf. */
  protected o$(l: LeafRef): any {
    return this.rec$.obj[this.obj$ + l.obj];
  }
}

/** A read-only list whose elements are converted on access. */
export class TypedList<T> implements Iterable<T> {
  constructor(
    readonly raw: ListC,
    private readonly conv: (v: Elem) => T,
  ) {}
  get length(): number {
    return this.raw.items.length;
  }
  /** Element i, or undefined past the end. */
  at(i: number): T | undefined {
    const v = this.raw.items[i];
    return v === undefined ? undefined : this.conv(v);
  }
  toArray(): T[] {
    return this.raw.items.map(this.conv);
  }
  *[Symbol.iterator](): Iterator<T> {
    for (const v of this.raw.items) yield this.conv(v);
  }
}

/** A read-only map whose values are converted on access; keys iterate in ascending order. */
export class TypedMap<K extends Key, V> implements Iterable<[K, V]> {
  constructor(
    readonly raw: MapC | BagC,
    private readonly conv: (v: Elem) => V,
  ) {}
  get size(): number {
    return this.raw.m.size;
  }
  has(k: K): boolean {
    return this.raw.m.has(k);
  }
  get(k: K): V | undefined {
    const v = this.raw.m.get(k);
    return v === undefined ? undefined : this.conv(v);
  }
  /** Keys in ascending order. */
  keys(): K[] {
    return this.raw.keys() as K[];
  }
  *[Symbol.iterator](): Iterator<[K, V]> {
    for (const k of this.raw.keys()) yield [k as K, this.conv(this.raw.m.get(k)!)];
  }
}

/** A list change with typed elements. */
export interface TypedListEvent<T> {
  kind: ItemKind;
  index: number;
  old?: T;
  new?: T;
}

/** A map change with typed keys and values. */
export interface TypedMapEvent<K, V> {
  kind: ItemKind;
  key: K;
  old?: V;
  new?: V;
}

/**
 * A bag change: an item added, removed or replaced (itemLeaf −1, old and
 * new the items), or one field of an item changed (itemLeaf is the item
 * struct's leaf, old and new that field's values).
 */
export interface TypedBagEvent<K, V> {
  kind: ItemKind;
  key: K;
  itemLeaf: number;
  /** The item under key once the tick is applied, if any. */
  item: V | undefined;
  old?: unknown;
  new?: unknown;
}

/** The JS value of a numeric or scalar element of type t (for typed containers and events). */
export function elemConv(t: import("./schema.js").Type): (v: Elem) => any {
  return (v) => elemValue(t, v);
}

/** Converts untyped events into typed ones for generated callbacks. */
export function listEvent<T>(ev: ListEvent, conv: (v: any) => T, structs: boolean): TypedListEvent<T> {
  const o: TypedListEvent<T> = { kind: ev.kind, index: ev.index };
  if (ev.old !== undefined) o.old = structs ? conv(ev.old) : (ev.old as T);
  if (ev.new !== undefined) o.new = structs ? conv(ev.new) : (ev.new as T);
  return o;
}

export function mapEvent<K, V>(ev: MapEvent, conv: (v: any) => V, structs: boolean): TypedMapEvent<K, V> {
  const o: TypedMapEvent<K, V> = { kind: ev.kind, key: ev.key as K };
  if (ev.old !== undefined) o.old = structs ? conv(ev.old) : (ev.old as V);
  if (ev.new !== undefined) o.new = structs ? conv(ev.new) : (ev.new as V);
  return o;
}

export function bagEvent<K, V>(ev: BagEvent, conv: (r: Rec) => V): TypedBagEvent<K, V> {
  const o: TypedBagEvent<K, V> = { kind: ev.kind, key: ev.key as K, itemLeaf: ev.itemLeaf, item: ev.item ? conv(ev.item) : undefined };
  const wrap = (v: unknown): unknown => (v instanceof Rec ? conv(v) : v);
  if (ev.old !== undefined) o.old = wrap(ev.old);
  if (ev.new !== undefined) o.new = wrap(ev.new);
  return o;
}

/** Registration helpers the generated static methods call. */
export type Unregister = () => void;

export function isClassOf(e: Entity | undefined, c: StructType): e is Entity {
  return e !== undefined && e.type === c;
}

export type { Replica };
