/**
 * The runtime side of the typed classes replicagen generates (replicagen
 * -ts): views over records, typed read-only containers, typed container
 * events, and the lookups generated modules run once when loaded. Game
 * code uses the generated classes; it rarely needs these directly.
 */

import { misuse } from "./errors.js";
import { decodeDescriptor } from "./descriptor.js";
import type { Replica, BagEvent, ListEvent, MapEvent, ItemKind } from "./replica.js";
import { reach, type Schema, type StructType } from "./schema.js";
import { BagC, ListC, MapC, Rec, elemValue, type Elem, type Entity, type Key } from "./state.js";
import { numPlan, numValue, type NumPlan } from "./values.js";

/** A leaf, or a nested struct field, of a struct as generated code reads it: where its values are. */
export interface LeafRef {
  /** @internal The numeric and object slots (of the leaf, or before the nested field's first leaf). */
  num: number;
  /** @internal */
  obj: number;
  /** @internal A numeric leaf's plan. */
  plan: NumPlan | null;
}

const generated = (msg: string): never => misuse(`generated code: ${msg}: regenerate it`);

/** Decodes the base64 descriptor a generated module embeds. */
export const schemaFromBase64 = (b64: string): Schema => decodeDescriptor(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0)));

/** Every struct type a schema reaches (classes, nested structs, elements, bag items, RPC arguments), by name. */
export const structsOf = (schema: Schema): Map<string, StructType> => {
  const out = new Map<string, StructType>();
  for (const s of reach(schema.classes)) if (!out.has(s.name)) out.set(s.name, s);
  return out;
};

/** The struct named name of schema; throws if the embedded descriptor lacks it. */
export const structNamed = (structs: Map<string, StructType>, name: string): StructType => structs.get(name) ?? generated("no struct " + name);

/** Leaf i of s, checked against the generated code's expectation of its dotted name. */
export const leafRef = (s: StructType, i: number, name: string): LeafRef => {
  const l = s.leaves[i];
  if (l?.name !== name) generated(`${s.name} leaf ${i}: want ${name}`);
  return { num: l!.num, obj: l!.obj, plan: l!.num >= 0 ? numPlan(l!.ty) : null };
};

/**
 * The slot offsets of the nested struct field whose first leaf is leaf i
 * of s: the numeric and object slots of the leaves before it (slots are
 * assigned in leaf order, §5.5).
 */
export const nestedAt = (s: StructType, i: number, name: string): LeafRef => {
  const l = s.leaves[i];
  if (i > s.leaves.length || (l && !l.name.startsWith(name + "."))) generated(`${s.name} leaf ${i}: want ${name}.`);
  const num = s.leaves.slice(0, i).filter((x) => x.num >= 0).length;
  return { num, obj: i - num, plan: null };
};

/**
 * A view of a struct stored in a record at slot offsets (a nested struct
 * inline in its parent), or of a whole record (an entity, an element, a
 * bag item, RPC arguments). Generated classes extend it with getters.
 */
export class StructView {
  /** The record the values live in. */
  declare readonly rec$: Rec;
  /** Numeric and object slot offsets of the struct in rec$. */
  declare readonly num$: number;
  declare readonly obj$: number;
  constructor(rec$: Rec, num$ = 0, obj$ = 0) {
    this.rec$ = rec$;
    this.num$ = num$;
    this.obj$ = obj$;
  }

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

  /** A view of class C of the nested struct field at. */
  protected s$<T>(C: new (r: Rec, num: number, obj: number) => T, at: LeafRef): T {
    return new C(this.rec$, this.num$ + at.num, this.obj$ + at.obj);
  }
}

/** What a typed list and a typed map share: the container and the converter of its values. */
class Typed<C, T> {
  declare readonly raw: C;
  private declare readonly conv: (v: Elem) => T;
  constructor(raw: C, conv: (v: Elem) => T) {
    this.raw = raw;
    this.conv = conv;
  }
  /** @internal v converted, or undefined. */
  cv(v: Elem | undefined): T | undefined {
    return v === undefined ? v : this.conv(v);
  }
}

/** A read-only list whose elements are converted on access. */
export class TypedList<T> extends Typed<ListC, T> implements Iterable<T> {
  get length(): number {
    return this.raw.items.length;
  }
  /** Element i, or undefined past the end. */
  at(i: number): T | undefined {
    return this.cv(this.raw.items[i]);
  }
  toArray(): T[] {
    return this.raw.items.map((v) => this.cv(v)!);
  }
  *[Symbol.iterator](): Iterator<T> {
    yield* this.toArray();
  }
}

/** A read-only map whose values are converted on access; keys iterate in ascending order. */
export class TypedMap<K extends Key, V> extends Typed<MapC | BagC, V> implements Iterable<[K, V]> {
  get size(): number {
    return this.raw.m.size;
  }
  has(k: K): boolean {
    return this.raw.m.has(k);
  }
  get(k: K): V | undefined {
    return this.cv(this.raw.m.get(k));
  }
  /** Keys in ascending order. */
  keys(): K[] {
    return this.raw.keys() as K[];
  }
  *[Symbol.iterator](): Iterator<[K, V]> {
    yield* this.keys().map((k): [K, V] => [k, this.get(k)!]);
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

/** The converter of the elements of list or map leaf i of s to their JS values (for typed containers and events). */
export const elemConv = (s: StructType, i: number): (v: Elem) => any => {
  const t = s.leaves[i]!.ty.elem!;
  return (v) => elemValue(t, v);
};

/** A copy of an event with its old, new and item values converted by f. */
const typed = (ev: object, f: (v: any) => unknown): any => {
  const o: Record<string, unknown> = { ...ev };
  for (const k of ["old", "new", "item"]) if (o[k] !== undefined) o[k] = f(o[k]);
  return o;
};

/** Converts untyped events into typed ones for generated callbacks: struct elements become views. */
export const listEvent = <T>(ev: ListEvent, conv: (v: any) => T, structs: boolean): TypedListEvent<T> => (structs ? typed(ev, conv) : ev) as any;

export const mapEvent: <K, V>(ev: MapEvent, conv: (v: any) => V, structs: boolean) => TypedMapEvent<K, V> = listEvent as any;

export const bagEvent = <K, V>(ev: BagEvent, conv: (r: Rec) => V): TypedBagEvent<K, V> => typed(ev, (v) => (v instanceof Rec ? conv(v) : v));

/** Registration helpers the generated static methods call. */
export type Unregister = () => void;

export const isClassOf = (e: Entity | undefined, c: StructType): e is Entity => e?.type === c;

export type { Replica };
