/**
 * A client's entity table and the transaction that applies one tick to it
 * atomically (docs/protocol.md §7.3): every change is logged, and a
 * rollback restores the table exactly.
 */

import { ReplicaDecodeError } from "./errors.js";
import { isContainer, isNumeric, type Leaf, type StructType, type Type } from "./schema.js";
import { numPlan, numValue, toElem } from "./values.js";
import { Ev, Kind } from "./enums.js";
export { Ev } from "./enums.js";

/** Slot bits of a network ID (§5.4). */
export const SLOT_BITS = 24;
export const SLOT_MASK = (1 << SLOT_BITS) - 1;

/** A container element or map value: S as number/BigInt (§4.1), a string, bytes, or a struct record. */
export type Elem = number | bigint | string | Uint8Array | Rec;
/** A map or bag key: number/BigInt for integer kinds, string for string keys. */
export type Key = number | bigint | string;

/** The values of one struct: an entity, a list element, a map value or a bag item. */
export class Rec {
  /** Numeric slots: S of slot i at [2i] (low half) and [2i+1] (high half). */
  readonly num: Uint32Array;
  /** String (string), Uint8Array (bytes) and container slots. */
  readonly obj: unknown[];
  /** @internal The serial of the transaction that created the record: its numeric writes need no undo log. */
  txnMark = 0;

  constructor(readonly type: StructType) {
    this.num = new Uint32Array(type.numSlots * 2);
    this.obj = new Array(type.objSlots);
    for (const l of type.leaves) {
      if (l.obj >= 0) this.obj[l.obj] = zeroObj(l.field.type);
    }
  }

  /** A deep copy. */
  clone(): Rec {
    const c = new Rec(this.type);
    c.num.set(this.num);
    for (let i = 0; i < this.obj.length; i++) c.obj[i] = cloneObj(this.obj[i]);
    return c;
  }

  /** The JS value of leaf l (a leaf of this record's type). */
  leafValue(l: Leaf): unknown {
    const t = l.field.type;
    if (l.num >= 0) return numValue(numPlan(t), this.num[2 * l.num]!, this.num[2 * l.num + 1]!);
    return this.obj[l.obj];
  }

  /** The value of the field at a dotted path ("pos.x"); undefined if there is no such leaf. */
  get(path: string): unknown {
    const l = this.type.leafNamed(path);
    return l ? this.leafValue(l) : undefined;
  }

  /** Deep equality of values. */
  equals(o: Rec): boolean {
    if (o.type !== this.type) return false;
    const a = this.num;
    const b = o.num;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    for (let i = 0; i < this.obj.length; i++) if (!objEqual(this.obj[i], o.obj[i])) return false;
    return true;
  }
}

/** Zero value of an object slot's type: "", empty bytes, or an empty container. */
export function zeroObj(t: Type): unknown {
  switch (t.kind) {
    case Kind.String:
      return "";
    case Kind.Bytes:
      return EMPTY_BYTES;
    case Kind.List:
      return new ListC(t, []);
    case Kind.Map:
      return new MapC(t, new Map());
    case Kind.Bag:
      return new BagC(t, new Map());
  }
  return undefined;
}

const EMPTY_BYTES = new Uint8Array(0);

function cloneObj(v: unknown): unknown {
  if (v instanceof ListC || v instanceof MapC || v instanceof BagC) return v.clone();
  return v; // strings and bytes are never mutated in place
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Equality of two elements or object-slot values. */
export function objEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a instanceof Uint8Array && b instanceof Uint8Array) return bytesEqual(a, b);
  if (a instanceof Rec && b instanceof Rec) return a.equals(b);
  if (a instanceof ListC && b instanceof ListC) return a.equals(b);
  if (a instanceof MapC && b instanceof MapC) return a.equals(b);
  return false;
}

/** Compares two keys of kind k in the order encoders write them (§6.1): signed, unsigned, or bytewise. */
export function compareKeys(a: Key, b: Key): number {
  if (typeof a === "string") return compareUTF8(a, b as string);
  const x = a as number;
  const y = b as number;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Bytewise order of the UTF-8 encodings of two strings (code point order). */
export function compareUTF8(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x < y ? -1 : 1;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/** A list (§6). */
export class ListC {
  constructor(
    readonly type: Type,
    public items: Elem[],
  ) {}
  get length(): number {
    return this.items.length;
  }
  clone(): ListC {
    return new ListC(this.type, this.items.map((v) => (v instanceof Rec ? v.clone() : v)));
  }
  equals(o: ListC): boolean {
    if (o.items.length !== this.items.length) return false;
    for (let i = 0; i < this.items.length; i++) if (!objEqual(this.items[i], o.items[i])) return false;
    return true;
  }
  /** The JS values of the elements (numbers converted per §4.1). */
  values(): unknown[] {
    return this.items.map((v) => elemValue(this.type.elem!, v));
  }
}

/** A map (§6). */
export class MapC {
  constructor(
    readonly type: Type,
    public m: Map<Key, Elem>,
  ) {}
  get size(): number {
    return this.m.size;
  }
  clone(): this {
    const c = new Map<Key, Elem>();
    for (const [k, v] of this.m) c.set(k, v instanceof Rec ? v.clone() : v);
    return new (this.constructor as new (t: Type, m: Map<Key, Elem>) => this)(this.type, c);
  }
  equals(o: MapC): boolean {
    if (o.m.size !== this.m.size) return false;
    for (const [k, v] of this.m) {
      if (!o.m.has(k) || !objEqual(v, o.m.get(k))) return false;
    }
    return true;
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
  declare m: Map<Key, Rec>;
  constructor(type: Type, m: Map<Key, Rec>) {
    super(type, m);
  }
  override get(k: Key): Rec | undefined {
    return this.m.get(k);
  }
}

/** The JS value of an element of type t: numbers per §4.1, others as stored. */
export function elemValue(t: Type, v: Elem): unknown {
  if (isNumeric(t.kind)) {
    const p = numPlan(t);
    if (typeof v === "bigint") {
      const u = BigInt.asUintN(64, v);
      return numValue(p, Number(u & 0xffffffffn), Number(u >> 32n));
    }
    return numValue(p, (v as number) >>> 0, (v as number) < 0 ? 0xffffffff : 0);
  }
  return v;
}


/** Builds a network ID from a slot and a generation. */
export const makeId = (slot: number, gen: number): number => ((gen << SLOT_BITS) | slot) >>> 0;

/** An entity of a client replica. */
export class Entity extends Rec {
  /** Whether this client owns the entity (§10.2). */
  owned = false;
  /** Level of detail (§5.8), 0..nbands of the class. */
  level: number;
  /** False once a tick destroyed it. */
  alive = true;

  constructor(
    cls: StructType,
    /** Network ID: generation << 24 | slot. */
    readonly id: number,
    /** The class ID on the wire (the sender's class). */
    readonly classId: number,
    /** Bands of each leaf of cls as the sender defines them, and the sender's band count. */
    readonly bands: Uint8Array,
    readonly nbands: number,
  ) {
    super(cls);
    this.level = nbands;
  }

  get slot(): number {
    return this.id & SLOT_MASK;
  }

  get generation(): number {
    return this.id >>> SLOT_BITS;
  }

  /** The class this entity's values are stored as (the local class, or the sender's). */
  get cls(): StructType {
    return this.type;
  }

  /** Whether the leaf at path is known at the entity's level (§3.6): its band is 0 or ≤ level. */
  knows(path: string): boolean {
    const l = this.type.leafNamed(path);
    if (!l) return false;
    const b = this.bands[l.index] ?? 0; // classes without bands have no band array
    return b === 0 || b <= this.level;
  }
}

const PAGE_BITS = 10;
const PAGE_SIZE = 1 << PAGE_BITS;
const PAGE_MASK = PAGE_SIZE - 1;


/**
 * One change a transaction applied, reported to callbacks after commit.
 * Values are JS values (§4.1) as callbacks see them: an event is made only
 * for a watched leaf.
 */
export interface TxEvent {
  kind: number;
  e: Entity;
  /** The entity's leaf, or −1. */
  leaf: number;
  /** A list event's index, or −1. */
  index: number;
  key: Key | undefined;
  /** A bag item's leaf whose value changed (BagItem), or −1 for a whole item. */
  itemLeaf: number;
  old: unknown;
  new: unknown;
}

function event(kind: number, e: Entity, leaf = -1, old?: unknown, now?: unknown, key?: Key, index = -1, itemLeaf = -1): TxEvent {
  return { kind, e, leaf, index, key, itemLeaf, old, new: now };
}

/** The entities of a replica, keyed by slot, changed only through a {@link Txn}. */
export class Table {
  private dir: (Entity | undefined)[][] = [];
  private n = 0;
  /**
   * @internal The slots of the entities as of the last commit (so, in a
   * transaction, when it began), ascending: ranked update sections (§5.4)
   * name entities by their index in it.
   */
  held: number[] = [];
  /** @internal the other buffer of held */
  spare: number[] = [];
  /** Per class: a flag per leaf whose changes are reported as events. */
  readonly watch = new Map<StructType, Uint8Array>();
  readonly txn = new Txn(this);

  get size(): number {
    return this.n;
  }

  /** The entity in slot, or undefined. */
  atSlot(slot: number): Entity | undefined {
    const p = this.dir[slot >>> PAGE_BITS];
    return p ? p[slot & PAGE_MASK] : undefined;
  }

  /** The entity with network ID id (generation included), or undefined. */
  entity(id: number): Entity | undefined {
    const e = this.atSlot(id & SLOT_MASK);
    return e && e.id === id >>> 0 ? e : undefined;
  }

  /** @internal */
  put(e: Entity): void {
    const slot = e.slot;
    const i = slot >>> PAGE_BITS;
    let p = this.dir[i];
    if (!p) {
      while (this.dir.length <= i) this.dir.push(undefined as unknown as Entity[]);
      p = this.dir[i] = new Array(PAGE_SIZE);
    }
    p[slot & PAGE_MASK] = e;
    this.n++;
  }

  /** @internal */
  remove(slot: number): void {
    const p = this.dir[slot >>> PAGE_BITS]!;
    p[slot & PAGE_MASK] = undefined;
    this.n--;
  }

  /** Every entity, in ascending slot order. */
  entities(): Entity[] {
    const out: Entity[] = [];
    for (const p of this.dir) {
      if (!p) continue;
      for (const e of p) if (e) out.push(e);
    }
    return out;
  }

  /**
   * @internal Brings held up to date with the slots moved, where a
   * transaction created or destroyed entities: each is in held if and
   * only if it holds an entity now.
   */
  mergeHeld(moved: number[]): void {
    moved.sort((a, b) => a - b);
    const held = this.held;
    const out = this.spare;
    out.length = 0;
    let i = 0;
    for (let j = 0; j < moved.length; j++) {
      const m = moved[j]!;
      if (j > 0 && m === moved[j - 1]) continue;
      while (i < held.length && held[i]! < m) out.push(held[i++]!);
      if (i < held.length && held[i] === m) i++;
      if (this.atSlot(m)) out.push(m);
    }
    while (i < held.length) out.push(held[i++]!);
    this.held = out;
    this.spare = held;
  }

  /** Watches leaf of class c for events. */
  watchLeaf(c: StructType, leaf: number): void {
    let w = this.watch.get(c);
    if (!w) this.watch.set(c, (w = new Uint8Array(c.leaves.length)));
    w[leaf] = 1;
    this.txn.lastC = undefined;
  }
}

/**
 * A transaction: applies one tick's changes to a {@link Table} with an undo
 * log. commit keeps them and returns the events; rollback undoes them all.
 */
export class Txn {
  // Numeric writes: each write to a record not created in this transaction
  // logs the slot's old value (record in savedRecs, slot index and old
  // value in saved); a rollback restores them newest first. The log is
  // cleared by count, so its arrays keep their size from tick to tick.
  private serial = 1;
  private savedRecs: Rec[] = [];
  private nSaved = 0;
  private saved = new Uint32Array(3 * 256);
  private undo: (() => void)[] = [];
  private fillable = new Set<number>();
  /** The slots this transaction created or destroyed an entity in. */
  private moved: number[] = [];
  events: TxEvent[] = [];
  /** @internal one-entry cache of the table's watch map */
  lastC: StructType | undefined;
  private lastW: Uint8Array | undefined;

  constructor(private readonly t: Table) {}

  /** Starts a transaction. */
  begin(): this {
    this.serial++;
    this.nSaved = 0;
    this.undo.length = 0;
    this.fillable.clear();
    this.moved.length = 0;
    this.events = [];
    return this;
  }

  /** The number of entities the table held when the transaction began. */
  heldLen(): number {
    return this.t.held.length;
  }

  /**
   * The slot of the entity of rank r (from 0, by ascending slot) among
   * those the table held when the transaction began, or -1 if r is out of
   * range.
   */
  heldSlot(r: number): number {
    return r < this.t.held.length ? this.t.held[r]! : -1;
  }

  /** Whether events about leaf of e's class are wanted. */
  wants(e: Rec, leaf: number): boolean {
    if (e.type !== this.lastC) {
      this.lastC = e.type;
      this.lastW = this.t.watch.get(e.type);
    }
    return this.lastW !== undefined && this.lastW[leaf] === 1;
  }

  atSlot(slot: number): Entity | undefined {
    return this.t.atSlot(slot);
  }

  /** Whether a fill may set values of the entity in slot (§5.1, §5.8). */
  isFillable(slot: number): boolean {
    return this.fillable.has(slot);
  }

  markFillable(slot: number): void {
    this.fillable.add(slot);
  }

  /** Creates an entity. */
  create(cls: StructType, id: number, classId: number, bands: Uint8Array, nbands: number): Entity {
    const slot = id & SLOT_MASK;
    if (this.t.atSlot(slot)) throw new ReplicaDecodeError("exists", `slot ${slot} holds an entity`);
    const e = new Entity(cls, id, classId, bands, nbands);
    e.txnMark = this.serial; // nothing to restore: a rollback removes it
    this.t.put(e);
    this.fillable.add(slot);
    this.moved.push(slot);
    this.undo.push(() => this.t.remove(slot));
    this.events.push(event(Ev.Create, e));
    return e;
  }

  /** Destroys the entity in slot. */
  destroySlot(slot: number): void {
    const e = this.t.atSlot(slot);
    if (!e) throw new ReplicaDecodeError("not-found", `destroy of empty slot ${slot}`);
    this.t.remove(slot);
    this.moved.push(slot);
    this.set(e, "alive", false);
    this.undo.push(() => this.t.put(e));
    this.events.push(event(Ev.Destroy, e));
  }

  /** Sets o[k] to v, logging the old value for a rollback; returns it. */
  private set<T, K extends keyof T>(o: T, k: K, v: T[K]): T[K] {
    const old = o[k];
    o[k] = v;
    this.undo.push(() => (o[k] = old));
    return old;
  }

  /** Records that this client owns e, or no longer does. */
  setOwned(e: Entity, owned: boolean): void {
    if (e.owned !== owned) this.events.push(event(Ev.Owned, e, -1, this.set(e, "owned", owned), owned));
  }

  /** Sets e's level of detail. */
  setLevel(e: Entity, level: number): void {
    if (e.level !== level) this.events.push(event(Ev.Level, e, -1, this.set(e, "level", level), level));
  }

  /** Sets numeric slot `slot` (leaf `leaf`) of entity e to S = (lo, hi): the hot path of updates. */
  setNum(e: Entity, leaf: number, slot: number, lo: number, hi: number): void {
    const a = e.num;
    const i = slot << 1;
    const olo = a[i]!;
    const ohi = a[i + 1]!;
    if (olo === lo && ohi === hi) return;
    if (e.txnMark !== this.serial) this.save(e, i, olo, ohi);
    a[i] = lo;
    a[i + 1] = hi;
    if (this.wants(e, leaf)) this.numEvent(e, leaf, e, olo, ohi, lo, hi);
  }

  /** Sets numeric slot `slot` (item leaf `leaf`) of bag item r, the item under key k of e's bag at leaf bagLeaf. */
  setItemNum(e: Entity, leaf: number, slot: number, lo: number, hi: number, r: Rec, k: Key, bagLeaf: number): void {
    const a = r.num;
    const i = slot << 1;
    const olo = a[i]!;
    const ohi = a[i + 1]!;
    if (olo === lo && ohi === hi) return;
    if (r.txnMark !== this.serial) this.save(r, i, olo, ohi);
    a[i] = lo;
    a[i + 1] = hi;
    if (this.wants(e, bagLeaf)) this.numEvent(e, leaf, r, olo, ohi, lo, hi, k, bagLeaf);
  }

  private numEvent(e: Entity, leaf: number, r: Rec, olo: number, ohi: number, lo: number, hi: number, k?: Key, bagLeaf = -1): void {
    const p = numPlan(r.type.leaves[leaf]!.field.type);
    this.fieldEvent(e, leaf, numValue(p, olo, ohi), numValue(p, lo, hi), r, k, bagLeaf);
  }

  /** A field event, or an item field's (BagItem) when r is not e. */
  private fieldEvent(e: Entity, leaf: number, old: unknown, now: unknown, r: Rec, k: Key | undefined, bagLeaf: number): void {
    this.events.push(r === e ? event(Ev.Field, e, leaf, old, now) : event(Ev.BagItem, e, bagLeaf, old, now, k, -1, leaf));
  }

  /** Logs the old value (lo, hi) of r's numeric slot at num[i] for a rollback. */
  private save(r: Rec, i: number, lo: number, hi: number): void {
    const n = this.nSaved;
    let s = this.saved;
    if (3 * n + 3 > s.length) {
      const b = new Uint32Array(2 * s.length);
      b.set(s);
      this.saved = s = b;
    }
    s[3 * n] = i;
    s[3 * n + 1] = lo;
    s[3 * n + 2] = hi;
    if (n < this.savedRecs.length) this.savedRecs[n] = r;
    else this.savedRecs.push(r);
    this.nSaved = n + 1;
  }

  /**
   * Sets string, bytes or container slot `slot` of r, as setNum does. A
   * container replaces the old one: an entity's reports the difference as
   * item events, an item's one event without values.
   */
  setObj(e: Entity, leaf: number, slot: number, v: unknown, r: Rec = e, k?: Key, bagLeaf = -1): void {
    const old = r.obj[slot];
    const scalar = typeof v === "string" || v instanceof Uint8Array;
    if (scalar && objEqual(old, v)) return;
    this.set(r.obj, slot, v);
    if (!this.wants(e, r === e ? leaf : bagLeaf)) return;
    if (scalar) this.fieldEvent(e, leaf, old, v, r, k, bagLeaf);
    else if (r !== e) this.fieldEvent(e, leaf, undefined, undefined, r, k, bagLeaf);
    else this.diff(e, leaf, old as ListC | MapC, v as ListC | MapC);
  }

  /** Reports the difference between two containers of e's leaf as item events. */
  private diff(e: Entity, leaf: number, old: ListC | MapC, c: ListC | MapC): void {
    if (old instanceof ListC) {
      const n = (c as ListC).items;
      const o = old.items;
      const common = Math.min(o.length, n.length);
      for (let i = 0; i < common; i++) if (!objEqual(o[i], n[i])) this.itemEvent(Ev.ListSet, e, leaf, i, undefined, o[i], n[i]);
      for (let i = o.length - 1; i >= common; i--) this.itemEvent(Ev.ListRemove, e, leaf, i, undefined, o[i], undefined);
      for (let i = common; i < n.length; i++) this.itemEvent(Ev.ListAdd, e, leaf, i, undefined, undefined, n[i]);
    } else {
      const bag = old instanceof BagC;
      const n = c as MapC;
      for (const k of old.keys()) {
        const ov = old.m.get(k)!;
        if (!n.m.has(k)) this.itemEvent(bag ? Ev.BagRemove : Ev.MapRemove, e, leaf, -1, k, ov, undefined);
        else if (!objEqual(ov, n.m.get(k))) this.itemEvent(bag ? Ev.BagAdd : Ev.MapSet, e, leaf, -1, k, ov, n.m.get(k));
      }
      for (const k of n.keys()) if (!old.m.has(k)) this.itemEvent(bag ? Ev.BagAdd : Ev.MapAdd, e, leaf, -1, k, undefined, n.m.get(k));
    }
  }

  /** An item event of a list, map or bag leaf of e; list and map values converted (§4.1). */
  private itemEvent(kind: number, e: Entity, leaf: number, index: number, key: Key | undefined, o: unknown, n: unknown): void {
    if (!this.wants(e, leaf)) return;
    const t = e.type.leaves[leaf]!.field.type;
    const conv = (v: unknown): unknown => (v === undefined || t.kind === Kind.Bag ? v : elemValue(t.elem!, v as Elem));
    this.events.push(event(kind, e, leaf, conv(o), conv(n), key, index));
  }

  listInsert(e: Entity, leaf: number, l: ListC, i: number, v: Elem): void {
    if (i < 0 || i > l.items.length) throw new ReplicaDecodeError("index", `insert at ${i} of ${l.items.length}`);
    l.items.splice(i, 0, v);
    this.undo.push(() => l.items.splice(i, 1));
    this.itemEvent(Ev.ListAdd, e, leaf, i, undefined, undefined, v);
  }

  listRemove(e: Entity, leaf: number, l: ListC, i: number): void {
    if (i < 0 || i >= l.items.length) throw new ReplicaDecodeError("index", `remove ${i} of ${l.items.length}`);
    const old = l.items.splice(i, 1)[0]!;
    this.undo.push(() => l.items.splice(i, 0, old));
    this.itemEvent(Ev.ListRemove, e, leaf, i, undefined, old, undefined);
  }

  listSet(e: Entity, leaf: number, l: ListC, i: number, v: Elem): void {
    if (i < 0 || i >= l.items.length) throw new ReplicaDecodeError("index", `set ${i} of ${l.items.length}`);
    this.itemEvent(Ev.ListSet, e, leaf, i, undefined, this.set(l.items, i, v), v);
  }

  listClear(e: Entity, leaf: number, l: ListC): void {
    const old = this.set(l, "items", []);
    for (let i = old.length - 1; i >= 0; i--) this.itemEvent(Ev.ListRemove, e, leaf, i, undefined, old[i], undefined);
  }

  /** Puts an entry of a map, or an item of a bag. */
  mapPut(e: Entity, leaf: number, m: MapC, k: Key, v: Elem): void {
    const existed = m.m.has(k);
    const old = m.m.get(k);
    m.m.set(k, v);
    this.undo.push(() => (existed ? m.m.set(k, old!) : m.m.delete(k)));
    this.itemEvent(m instanceof BagC ? Ev.BagAdd : existed ? Ev.MapSet : Ev.MapAdd, e, leaf, -1, k, old, v);
  }

  /** Deletes an entry of a map, or an item of a bag. */
  mapDelete(e: Entity, leaf: number, m: MapC, k: Key): void {
    if (!m.m.has(k)) throw new ReplicaDecodeError("no-key", `delete of absent key ${k}`);
    const old = m.m.get(k)!;
    m.m.delete(k);
    this.undo.push(() => m.m.set(k, old));
    this.itemEvent(m instanceof BagC ? Ev.BagRemove : Ev.MapRemove, e, leaf, -1, k, old, undefined);
  }

  /**
   * Sets the given leaves of e to their zero values and makes e fillable
   * (an ownership or level change, §5.1, §5.8).
   */
  zeroLeaves(e: Entity, leaves: Iterable<number>): void {
    for (const li of leaves) {
      const l = e.type.leaves[li]!;
      if (l.num >= 0) this.setNum(e, li, l.num, 0, 0);
      else {
        const cur = e.obj[l.obj] as { length?: number; size?: number };
        // An empty container stays: a new one would report nothing but cost an undo.
        if (typeof cur !== "object" || cur instanceof Uint8Array || (cur.length ?? cur.size)! > 0) this.setObj(e, li, l.obj, zeroObj(l.field.type));
      }
    }
    this.fillable.add(e.slot);
  }

  /** Keeps every change; returns the events in the order the changes were applied. */
  commit(): TxEvent[] {
    if (this.moved.length > 0) {
      this.t.mergeHeld(this.moved);
      this.moved.length = 0;
    }
    this.nSaved = 0;
    this.undo.length = 0;
    return this.events;
  }

  /** Undoes every change, newest first. */
  rollback(): void {
    // Numeric slots never move, so they are restored apart from the rest.
    const s = this.saved;
    for (let j = this.nSaved - 1; j >= 0; j--) {
      const a = this.savedRecs[j]!.num;
      const i = s[3 * j]!;
      a[i] = s[3 * j + 1]!;
      a[i + 1] = s[3 * j + 2]!;
    }
    for (let j = this.undo.length - 1; j >= 0; j--) this.undo[j]!();
    this.begin();
  }
}

/** The leaves of class c whose effective visibility is exactly vis (a partition, §5.1). */
export function partLeaves(c: StructType, vis: number): number[] {
  const out: number[] = [];
  for (const l of c.leaves) if (l.vis === vis) out.push(l.index);
  return out;
}

/** Numeric and object leaf helpers for the dump of tests and tools. */
export const leafIsNumeric = (l: Leaf): boolean => l.num >= 0;

export { toElem };
