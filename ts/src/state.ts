/**
 * A client's entity table and the transaction that applies one tick to it
 * atomically (docs/protocol.md §7.3): every change is logged, and a
 * rollback restores the table exactly.
 */

import { fail, misuse } from "./errors.js";
import { EMPTY, compareBytes, encodeUTF8, split64 } from "./bits.js";
import { isNumeric, type Leaf, type StructType, type Type } from "./schema.js";
import { numPlan, numValue } from "./values.js";
import { Ev, Kind } from "./enums.js";

/** A container element or map value: S as number/BigInt (§4.1), a string, bytes, or a struct record. */
export type Elem = number | bigint | string | Uint8Array | Rec;
/** A map or bag key: number/BigInt for integer kinds, string for string keys. */
export type Key = number | bigint | string;

/** The values of one struct: an entity, a list element, a map value or a bag item. */
// The classes' fields are declared, not defined, and set by their
// constructors: the bundle then has no field definitions beside them.
export class Rec {
  declare readonly type: StructType;
  /** @internal Numeric slots: S of slot i at [2i] (low half) and [2i+1] (high half). */
  declare readonly num: Uint32Array;
  /** @internal String (string), Uint8Array (bytes) and container slots. */
  declare readonly obj: unknown[];
  /** @internal The serial of the transaction that created the record: its numeric writes need no undo log. */
  declare txnMark: number;

  constructor(type: StructType) {
    this.type = type;
    this.num = new Uint32Array(type.numSlots * 2);
    this.obj = type.objTypes.map(zeroObj);
    this.txnMark = 0;
  }

  /** A deep copy. */
  clone(): this {
    return clone(this);
  }

  /** Deep equality of values. */
  equals(o: Rec): boolean {
    return equal(this, o);
  }

  /**
   * The value of the leaf at a dotted path ("pos.x") as §4.1 converts it.
   * A path that names no leaf of the struct (a misspelt name, a nested
   * struct) throws, as Entity.knows does: it costs nothing when it does.
   */
  get(path: string): unknown {
    const l = this.type.leafNamed(path) ?? misuse(`${this.type.name} has no leaf "${path}"`);
    return l.num < 0 ? this.obj[l.obj] : numValue(numPlan(l.ty), this.num[2 * l.num]!, this.num[2 * l.num + 1]!);
  }
}

/** Zero value of an object slot's type: "", empty bytes, or an empty container. */
export const zeroObj = (t: Type): unknown =>
  t.kind === Kind.String ? "" : t.kind === Kind.Bytes ? EMPTY : t.kind === Kind.List ? new ListC(t, []) : new (t.kind === Kind.Map ? MapC : BagC)(t, new Map());

/** A deep copy of a value: records and containers are copied, the rest (never mutated in place) is not. */
export function clone<T>(v: T): T {
  if (v instanceof Rec) {
    const c = new Rec(v.type);
    c.num.set(v.num);
    v.obj.forEach((x, i) => (c.obj[i] = clone(x)));
    return c as T;
  }
  if (v instanceof ListC) return new ListC(v.type, v.items.map(clone)) as T;
  if (v instanceof MapC) return new (v.constructor as typeof MapC)(v.type, new Map([...v.m].map(([k, x]) => [k, clone(x)]))) as T;
  return v;
}

/** Whether two sequences are equal element by element. */
const all = (x: ArrayLike<unknown>, y: ArrayLike<unknown>): boolean => x.length === y.length && Array.prototype.every.call(x, (v, i) => equal(v, y[i]));

/** Deep equality of two elements or object-slot values. */
export const equal = (a: unknown, b: unknown): boolean =>
  a === b ||
  (a instanceof Uint8Array && b instanceof Uint8Array
    ? all(a, b)
    : a instanceof Rec && b instanceof Rec
      ? a.type === b.type && all(a.num, b.num) && all(a.obj, b.obj)
      : a instanceof ListC && b instanceof ListC
        ? all(a.items, b.items)
        : a instanceof MapC && b instanceof MapC && a.m.size === b.m.size && [...a.m].every(([k, v]) => b.m.has(k) && equal(v, b.m.get(k))));

/**
 * Compares two keys in the order encoders write them (§6.1): numbers and
 * BigInts by value, strings bytewise by their UTF-8 (code point order).
 */
export const compareKeys = (a: Key, b: Key): number =>
  typeof a === "string" ? compareBytes(encodeUTF8(a), encodeUTF8(b as string)) : a < (b as number) ? -1 : +(a > (b as number));

/** A list (§6). */
export class ListC {
  declare readonly type: Type;
  /** @internal The elements as stored (numbers as S, §4.1): values() converts them. */
  declare items: Elem[];
  constructor(type: Type, items: Elem[]) {
    this.type = type;
    this.items = items;
  }
  get length(): number {
    return this.items.length;
  }
  /** The JS values of the elements (numbers converted per §4.1). */
  values(): unknown[] {
    return this.items.map((v) => elemValue(this.type.elem!, v));
  }
}

/** A map (§6). */
export class MapC {
  declare readonly type: Type;
  /** @internal The entries as stored (numbers as S, §4.1): get() returns them so. */
  declare m: Map<Key, Elem>;
  constructor(type: Type, m: Map<Key, Elem>) {
    this.type = type;
    this.m = m;
  }
  get size(): number {
    return this.m.size;
  }
  /** Keys in ascending order (§6.1). */
  keys(): Key[] {
    return [...this.m.keys()].sort(compareKeys);
  }
  get(k: Key): Elem | undefined {
    return this.m.get(k);
  }
}

/** A bag of struct items keyed by integers (§6): a map whose values are records. */
export class BagC extends MapC {
  /** @internal The items by key. */
  declare m: Map<Key, Rec>;
}
export interface BagC {
  get(k: Key): Rec | undefined;
}

/** The JS value of an element of type t: numbers per §4.1, others as stored. */
export const elemValue = (t: Type, v: Elem): unknown => {
  if (!isNumeric(t.kind)) return v;
  if (typeof v === "bigint") return split64(v, (lo, hi) => numValue(numPlan(t), lo, hi));
  return numValue(numPlan(t), (v as number) >>> 0, (v as number) < 0 ? 0xffffffff : 0);
};

/** Builds a network ID from a slot and a generation (§5.4). */
export const makeId = (slot: number, gen: number): number => ((gen << 24) | slot) >>> 0;

/** An entity of a client replica. */
export class Entity extends Rec {
  /** Network ID: generation << 24 | slot. */
  declare readonly id: number;
  /** The class ID on the wire (the sender's class). */
  declare readonly classId: number;
  /** @internal Bands of each leaf of cls as the sender defines them. */
  declare readonly bands: Uint8Array;
  /** The sender's band count: level is 0..nbands. */
  declare readonly nbands: number;
  /** Whether this client owns the entity (§10.2). */
  declare owned: boolean;
  /** Level of detail (§5.8), 0..nbands of the class. */
  declare level: number;
  /** False once a tick destroyed it. */
  declare alive: boolean;

  constructor(cls: StructType, id: number, classId: number, bands: Uint8Array, nbands: number) {
    super(cls);
    this.id = id;
    this.classId = classId;
    this.bands = bands;
    this.level = this.nbands = nbands;
    this.owned = false;
    this.alive = true;
  }

  get slot(): number {
    return this.id & 0xffffff;
  }

  get generation(): number {
    return this.id >>> 24;
  }

  /** The class this entity's values are stored as (the local class, or the sender's). */
  get cls(): StructType {
    return this.type;
  }

  /**
   * Whether the field at path (dotted for nested fields: "gear",
   * "gear.helm") is known at the entity's level (§3.6): its band is 0 or
   * ≤ level. A level-of-detail field out of reach reads as its zero value
   * and is not known. Throws for a path the class does not have.
   */
  knows(path: string): boolean {
    const l = this.type.leaves.find((l) => l.name === path || l.name.startsWith(path + "."));
    if (!l) misuse(`${this.type.name} has no field "${path}"`);
    return (this.bands[l.index] ?? 0) <= this.level; // classes without bands have no band array
  }
}

/**
 * One change a transaction applied, reported to callbacks after commit:
 * the callback list it goes to (Ev.Create, Ev.Destroy, Ev.Owned, Ev.Level,
 * or Ev.Field + the leaf) and the callbacks' arguments. Events are made
 * only for watched leaves.
 */
export interface TxEvent {
  k: number;
  e: Entity;
  a: unknown[];
}

/** What item events are, by their kind's index. */
const ITEM_KINDS = ["added", "removed", "changed"] as const;

/**
 * The entities of a replica, keyed by slot, and the transaction that
 * changes them: begin, changes logged for a rollback, then commit (which
 * keeps them and leaves the events) or rollback (which undoes them all).
 */
export interface Table {
  /** The number of entities. */
  size: number;
  /**
   * The slots of the entities as of the last commit (so, in a transaction,
   * when it began), ascending: ranked update sections (§5.4) name entities
   * by their index in it.
   */
  held: number[];
  /** The slots whose entity a fill may set values of (§5.1, §5.8). */
  fillable: Set<number>;
  /** The events of the transaction, in the order its changes were applied. */
  events: TxEvent[];
  /** The entity in slot, or undefined. */
  atSlot(slot: number): Entity | undefined;
  /** Watches leaf of class c for events. */
  watchLeaf(c: StructType, leaf: number): void;
  /** Starts a transaction. */
  begin(): Table;
  /** Creates an entity. */
  create(cls: StructType, id: number, classId: number, bands: Uint8Array, nbands: number): Entity;
  /** Destroys the entity in slot. */
  destroySlot(slot: number): void;
  /** Records that this client owns e, or no longer does. */
  setOwned(e: Entity, owned: boolean): void;
  /** Sets e's level of detail. */
  setLevel(e: Entity, level: number): void;
  /**
   * Sets numeric slot `slot` (leaf `leaf`) of record r to S = (lo, hi): of
   * entity e (the hot path of updates), or of bag item r, the item under
   * key k of e's bag at leaf bagLeaf.
   */
  setNum(e: Entity, leaf: number, slot: number, lo: number, hi: number, r?: Rec, k?: Key, bagLeaf?: number): void;
  /**
   * Sets string, bytes or container slot `slot` of r, as setNum does. A
   * container replaces the old one: an entity's reports the difference as
   * item events, an item's one event without values.
   */
  setObj(e: Entity, leaf: number, slot: number, v: unknown, r?: Rec, k?: Key, bagLeaf?: number): void;
  /**
   * A list operation on l, a list leaf of e: insert v at i (op 0), remove
   * the element at i (1), set it to v (2), or remove every element (3).
   */
  listOp(e: Entity, leaf: number, l: ListC, op: number, i: number, v?: Elem): void;
  /** Puts an entry of a map or an item of a bag (v), or deletes it (v undefined). */
  mapOp(e: Entity, leaf: number, m: MapC, k: Key, v?: Elem): void;
  /**
   * Sets the leaves of e that pick selects to their zero values and makes
   * e fillable (an ownership or level change, §5.1, §5.8).
   */
  zeroLeaves(e: Entity, pick: (l: Leaf) => boolean): void;
  /** Keeps every change; the events stay in events. */
  commit(): void;
  /** Undoes every change, newest first. */
  rollback(): void;
}

/** A new, empty table. */
export const table = (): Table => {
  // Slots in pages of 1024: slots go up to 2^24.
  const pages: (Entity | undefined)[][] = [];
  /** Per class: a flag per leaf whose changes are reported as events. */
  const watch = new Map<StructType, Uint8Array>();
  // One-entry cache of watch.
  let lastC: StructType | undefined;
  let lastW: Uint8Array | undefined;

  // Numeric writes: each write to a record not created in this transaction
  // logs the slot's old value (record in savedRecs, slot index and old
  // value in saved); a rollback restores them newest first. The log is
  // cleared by count, so its arrays keep their size from tick to tick.
  let serial = 1;
  const savedRecs: Rec[] = [];
  let nSaved = 0;
  let saved = new Uint32Array(768);
  const undo: (() => void)[] = [];
  /** The slots this transaction created or destroyed an entity in. */
  const moved: number[] = [];

  const atSlot = (slot: number): Entity | undefined => pages[slot >>> 10]?.[slot & 1023];

  const put = (slot: number, e?: Entity): void => {
    (pages[slot >>> 10] ??= [])[slot & 1023] = e;
    t.size += e ? 1 : -1;
  };

  /** Whether events about leaf of r's class are wanted. */
  const wants = (r: Rec, leaf: number): boolean => {
    if (r.type !== lastC) lastW = watch.get((lastC = r.type));
    return lastW?.[leaf] === 1;
  };

  /** Sets o[k] to v, logging the old value for a rollback; returns it. */
  const assign = <T, K extends keyof T>(o: T, k: K, v: T[K]): T[K] => {
    const old = o[k];
    o[k] = v;
    undo.push(() => (o[k] = old));
    return old;
  };

  const event = (k: number, e: Entity, ...a: unknown[]): void => void t.events.push({ k, e, a: [e, ...a] });

  /** A field event, or an item field's ("changed", with the item's leaf) when r is not e. */
  const fieldEvent = (e: Entity, leaf: number, old: unknown, now: unknown, r: Rec, k: Key | undefined, bagLeaf: number): void =>
    r === e ? event(Ev.Field + leaf, e, old, now) : itemEvent(e, bagLeaf, 2, k!, old, now, leaf);

  /**
   * An item event (of ITEM_KINDS[kind]) of a list, map or bag leaf of e:
   * list and map values converted (§4.1); for a bag, itemLeaf is the item's
   * leaf whose value changed, or −1 for a whole item.
   */
  const itemEvent = (e: Entity, leaf: number, kind: number, key: Key, o: unknown, n?: unknown, itemLeaf = -1): void => {
    if (!wants(e, leaf)) return;
    const ty = e.type.leaves[leaf]!.ty;
    const bag = ty.kind === Kind.Bag;
    const ev: Record<string, unknown> = { kind: ITEM_KINDS[kind], [ty.kind === Kind.List ? "index" : "key"]: key };
    if (bag) ev.itemLeaf = itemLeaf;
    const conv = (v: unknown): unknown => (bag ? v : elemValue(ty.elem!, v as Elem));
    if (o !== undefined) ev.old = conv(o);
    if (n !== undefined) ev.new = conv(n);
    event(Ev.Field + leaf, e, ev);
  };

  const setNum = (e: Entity, leaf: number, slot: number, lo: number, hi: number, r: Rec = e, k?: Key, bagLeaf = -1): void => {
    const a = r.num;
    const i = slot << 1;
    const olo = a[i]!;
    const ohi = a[i + 1]!;
    if (olo === lo && ohi === hi) return;
    if (r.txnMark !== serial) {
      // Logs the old value for a rollback.
      const n = nSaved++;
      if (3 * n + 3 > saved.length) {
        const s = saved;
        (saved = new Uint32Array(2 * s.length)).set(s);
      }
      saved[3 * n] = i;
      saved[3 * n + 1] = olo;
      saved[3 * n + 2] = ohi;
      savedRecs[n] = r;
    }
    a[i] = lo;
    a[i + 1] = hi;
    if (wants(e, r === e ? leaf : bagLeaf)) {
      const p = numPlan(r.type.leaves[leaf]!.ty);
      fieldEvent(e, leaf, numValue(p, olo, ohi), numValue(p, lo, hi), r, k, bagLeaf);
    }
  };

  const setObj = (e: Entity, leaf: number, slot: number, v: unknown, r: Rec = e, k?: Key, bagLeaf = -1): void => {
    const old = r.obj[slot];
    const scalar = typeof v === "string" || v instanceof Uint8Array;
    if (scalar && equal(old, v)) return;
    assign(r.obj, slot, v);
    if (!wants(e, r === e ? leaf : bagLeaf)) return;
    if (scalar || r !== e) fieldEvent(e, leaf, scalar ? old : undefined, scalar ? v : undefined, r, k, bagLeaf);
    else if (old instanceof ListC) {
      // The difference between two lists: elements changed, removed from the end, added.
      const n = (v as ListC).items;
      const o = old.items;
      const c = Math.min(o.length, n.length);
      for (let i = 0; i < c; i++) if (!equal(o[i], n[i])) itemEvent(e, leaf, 2, i, o[i], n[i]);
      for (let i = o.length; i-- > c; ) itemEvent(e, leaf, 1, i, o[i]);
      for (let i = c; i < n.length; i++) itemEvent(e, leaf, 0, i, undefined, n[i]);
    } else {
      const m = v as MapC;
      for (const k of (old as MapC).keys()) {
        const ov = (old as MapC).m.get(k);
        if (!m.m.has(k)) itemEvent(e, leaf, 1, k, ov);
        else if (!equal(ov, m.m.get(k))) itemEvent(e, leaf, 2, k, ov, m.m.get(k));
      }
      for (const k of m.keys()) if (!(old as MapC).m.has(k)) itemEvent(e, leaf, 0, k, undefined, m.m.get(k));
    }
  };

  const t: Table = {
    size: 0,
    held: [],
    fillable: new Set(),
    events: [],
    atSlot,
    setNum,
    setObj,

    watchLeaf(c, leaf) {
      let w = watch.get(c);
      if (!w) watch.set(c, (w = new Uint8Array(c.leaves.length)));
      w[leaf] = 1;
      lastC = undefined;
    },

    begin() {
      serial++;
      nSaved = undo.length = moved.length = 0;
      t.fillable.clear();
      t.events = [];
      return t;
    },

    create(cls, id, classId, bands, nbands) {
      const slot = id & 0xffffff;
      if (atSlot(slot)) fail("exists", "" + slot);
      const e = new Entity(cls, id, classId, bands, nbands);
      e.txnMark = serial; // nothing to restore: a rollback removes it
      put(slot, e);
      t.fillable.add(slot);
      moved.push(slot);
      undo.push(() => put(slot));
      event(Ev.Create, e);
      return e;
    },

    destroySlot(slot) {
      const e = atSlot(slot) ?? fail("not-found", "" + slot);
      put(slot);
      moved.push(slot);
      assign(e, "alive", false);
      undo.push(() => put(slot, e));
      event(Ev.Destroy, e);
    },

    setOwned(e, owned) {
      if (e.owned !== owned) event(Ev.Owned, e, (assign(e, "owned", owned), owned));
    },

    setLevel(e, level) {
      if (e.level !== level) event(Ev.Level, e, assign(e, "level", level), level);
    },

    listOp(e, leaf, l, op, i, v) {
      const a = l.items;
      if (op > 2) {
        l.items = [];
        undo.push(() => (l.items = a));
        for (let j = a.length; j--; ) itemEvent(e, leaf, 1, j, a[j]);
        return;
      }
      if (i > a.length - +!!op) fail("index", i + " of " + a.length);
      const old = op ? a[i] : undefined;
      if (op > 1) assign(a, i, v!);
      else {
        op ? a.splice(i, 1) : a.splice(i, 0, v!);
        undo.push(() => (op ? a.splice(i, 0, old!) : a.splice(i, 1)));
      }
      itemEvent(e, leaf, op, i, old, op === 1 ? undefined : v);
    },

    mapOp(e, leaf, m, k, v) {
      const had = m.m.has(k);
      const old = m.m.get(k);
      if (v === undefined) {
        if (!had) fail("no-key", "" + k);
        m.m.delete(k);
      } else m.m.set(k, v);
      undo.push(() => (had ? m.m.set(k, old!) : m.m.delete(k)));
      itemEvent(e, leaf, v === undefined ? 1 : had ? 2 : 0, k, old, v);
    },

    zeroLeaves(e, pick) {
      for (const l of e.type.leaves) {
        if (!pick(l)) continue;
        if (l.num >= 0) setNum(e, l.index, l.num, 0, 0);
        else {
          const z = zeroObj(l.ty);
          // An empty container stays: a new one would report nothing but cost an undo.
          if (!equal(e.obj[l.obj], z)) setObj(e, l.index, l.obj, z);
        }
      }
      t.fillable.add(e.slot);
    },

    commit() {
      // held, merged with the slots moved: each is in it if and only if it holds an entity now.
      if (moved.length) {
        const held = t.held;
        const out: number[] = [];
        let i = 0;
        for (const m of moved.sort((a, b) => a - b)) {
          while (held[i]! < m) out.push(held[i++]!);
          if (held[i] === m) i++;
          if (atSlot(m) && out.at(-1) !== m) out.push(m);
        }
        t.held = out.concat(held.slice(i));
      }
      nSaved = undo.length = 0;
    },

    rollback() {
      // Numeric slots never move, so they are restored apart from the rest.
      for (let j = nSaved - 1; j >= 0; j--) {
        const a = savedRecs[j]!.num;
        const i = saved[3 * j]!;
        a[i] = saved[3 * j + 1]!;
        a[i + 1] = saved[3 * j + 2]!;
      }
      for (let j = undo.length - 1; j >= 0; j--) undo[j]!();
      t.begin();
    },
  };
  return t;
};
