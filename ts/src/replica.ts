/**
 * A client's replica: the entities a server replicates to this client,
 * updated one tick at a time, atomically, with callbacks — the semantics
 * of the Go client (client/client.go, client/callbacks.go).
 *
 * Callbacks run after the whole tick is committed, in the order of the
 * tick's events and, for one event, in registration order. A new entity
 * reports its onCreate callbacks, then each watched scalar leaf whose
 * initial value is not zero as a change from zero, and each item of its
 * watched containers as added. A rejected tick leaves the replica exactly
 * as it was and runs no callback.
 */

import { ReplicaDecodeError } from "./errors.js";
import { Decoder, type Limits } from "./decoder.js";
import { isContainer, type Schema, type StructType } from "./schema.js";
import { BagC, Entity, Table, partLeaves, type Key, type Rec, type TxEvent } from "./state.js";
import { Ev, Kind, Vis } from "./enums.js";

export interface ReplicaOptions {
  /** The sender's schema when it differs from the local one (the WELCOME's descriptor). */
  remote?: Schema;
  /** Decoder limits (§7.1); absent fields take the defaults. */
  limits?: Partial<Limits>;
}

/** A level-of-detail change of a TICK (§5.8). */
export interface LevelChange {
  id: number;
  level: number;
}

/** The TICK's lists that go with a tick's segments (§10.2). */
export interface TickChanges {
  gained?: readonly number[];
  lost?: readonly number[];
  levels?: readonly LevelChange[];
}

export type ItemKind = "added" | "removed" | "changed";

export interface ListEvent {
  kind: ItemKind;
  index: number;
  old?: unknown;
  new?: unknown;
}

export interface MapEvent {
  kind: ItemKind;
  key: Key;
  old?: unknown;
  new?: unknown;
}

export interface BagEvent {
  kind: ItemKind;
  key: Key;
  /** −1 for a whole item added, removed or replaced; else the item's leaf that changed. */
  itemLeaf: number;
  old?: unknown;
  new?: unknown;
  /** The item stored under key once the tick is applied, if any. */
  item: Rec | undefined;
}

interface Callback {
  from: number;
  dead: boolean;
  fn: (...args: any[]) => void;
}

/** A client's copy of the entities replicated to it. */
export class Replica {
  readonly local: Schema;
  private remoteSchema: Schema;
  private dec: Decoder;
  private tab = new Table();
  /** Per class: callbacks by list, indexed as events (Ev): create, destroy, ownership, level, then Field + leaf. */
  private classes = new Map<StructType, Callback[][]>();
  private tick = 0;
  private dispatching = false;
  private parts = new Map<StructType, [number[], number[]]>();

  constructor(local: Schema, opts: ReplicaOptions = {}) {
    this.local = local;
    this.remoteSchema = opts.remote ?? local;
    this.dec = new Decoder(local, this.remoteSchema, opts.limits);
  }

  /** The sender's schema. */
  get remote(): Schema {
    return this.remoteSchema;
  }

  /** The decoder's limits, defaults filled in. */
  get limits(): Limits {
    return this.dec.lim;
  }

  /** The decoder (for RPC arguments). */
  get decoder(): Decoder {
    return this.dec;
  }

  /**
   * Ticks committed so far. A callback that throws propagates out of
   * applyTick after its tick was committed (the remaining callbacks of the
   * tick do not run); this count tells the two cases apart.
   */
  get ticksApplied(): number {
    return this.tick;
  }

  /** Number of entities. */
  get size(): number {
    return this.tab.size;
  }

  /** The entity with network ID id, or undefined. */
  entity(id: number): Entity | undefined {
    return this.tab.entity(id);
  }

  /** Every entity, in ascending slot order. */
  entities(): Entity[] {
    return this.tab.entities();
  }

  /** The entities this client owns, in ascending slot order. */
  owned(): Entity[] {
    return this.tab.entities().filter((e) => e.owned);
  }

  /** Applies one tick without ownership or level changes. */
  apply(...segments: Uint8Array[]): void {
    this.applyTick(segments);
  }

  private partLeaves(c: StructType): [number[], number[]] {
    let p = this.parts.get(c);
    if (!p) this.parts.set(c, (p = [partLeaves(c, Vis.Others), partLeaves(c, Vis.Owner)]));
    return p;
  }

  /**
   * Applies one tick (§5.1, §5.8, §10.2): the TICK's ownership and level
   * changes, then its segments in order, in one transaction. Either all of
   * it applies and the callbacks run, or none of it: a ReplicaDecodeError
   * is thrown (its `segment` is the index of the bad segment, −1 for the
   * TICK's lists) and the replica is exactly as it was.
   */
  applyTick(segments: readonly Uint8Array[], changes: TickChanges = {}): void {
    if (this.dispatching) throw new Error("replica: applyTick called from a callback");
    const tab = this.tab;
    const txn = tab.txn.begin();
    let seg = -1;
    try {
      for (const id of changes.lost ?? []) {
        const e = tab.entity(id);
        if (!e || !e.owned) throw new ReplicaDecodeError("ownership", `lost ${hex(id)}, which it does not own`);
        txn.zeroLeaves(e, this.partLeaves(e.type)[1]);
        txn.setOwned(e, false);
      }
      const created: number[] = [];
      for (const id of changes.gained ?? []) {
        const e = tab.entity(id);
        if (!e) created.push(id >>> 0);
        else if (e.owned) throw new ReplicaDecodeError("ownership", `gained ${hex(id)}, which it already owns`);
        else {
          txn.zeroLeaves(e, this.partLeaves(e.type)[0]);
          txn.setOwned(e, true);
        }
      }
      const later: LevelChange[] = [];
      const seen = new Set<number>();
      for (const lc of changes.levels ?? []) {
        const id = lc.id >>> 0;
        if (seen.has(id)) throw new ReplicaDecodeError("level", `${hex(id)} listed twice`);
        seen.add(id);
        const e = tab.entity(id);
        if (!e) later.push(lc);
        else this.changeLevel(e, lc.level);
      }
      for (seg = 0; seg < segments.length; seg++) this.dec.apply(txn, segments[seg]!);
      seg = -1;
      for (const id of created) {
        const e = tab.entity(id);
        if (!e || !txn.isFillable(e.slot) || e.owned) {
          throw new ReplicaDecodeError("ownership", `gained ${hex(id)}, which it neither has nor receives`);
        }
        txn.setOwned(e, true);
      }
      for (const lc of later) {
        const e = tab.entity(lc.id);
        if (!e) throw new ReplicaDecodeError("level", `level for ${hex(lc.id)}, which neither exists nor is created`);
        if (lc.level > e.nbands) throw new ReplicaDecodeError("level", `level ${lc.level} > ${e.nbands} bands`);
        txn.setLevel(e, lc.level);
      }
    } catch (e) {
      txn.rollback();
      if (e instanceof ReplicaDecodeError) e.segment = seg;
      throw e;
    }
    const events = txn.commit();
    this.tick++;
    this.dispatch(events);
  }

  /** Applies a level change to an entity held before the segments (§5.8). */
  private changeLevel(e: Entity, level: number): void {
    const txn = this.tab.txn;
    if (level > e.nbands) throw new ReplicaDecodeError("level", `level ${level} > ${e.nbands} bands`);
    if (level < e.level) {
      const drop: number[] = [];
      for (let i = 0; i < e.bands.length; i++) if (e.bands[i]! > level) drop.push(i);
      txn.zeroLeaves(e, drop);
    } else if (level > e.level) {
      txn.markFillable(e.slot);
    }
    txn.setLevel(e, level);
  }

  /**
   * Empties the replica for a new session whose sender speaks remote
   * (default: the current remote schema): every entity is destroyed, with
   * onDestroy callbacks. Callbacks stay registered.
   */
  reset(remote: Schema = this.remoteSchema): void {
    if (this.dispatching) throw new Error("replica: reset called from a callback");
    const dec = new Decoder(this.local, remote, this.dec.lim);
    const txn = this.tab.txn.begin();
    for (const e of this.tab.entities()) txn.destroySlot(e.slot);
    const events = txn.commit();
    this.dec = dec;
    this.remoteSchema = remote;
    this.parts.clear();
    this.dispatch(events);
  }

  // ---- Callbacks ----

  private classOf(c: StructType | string | number): StructType {
    const find = (s: Schema): StructType | undefined =>
      typeof c === "string" ? s.classNamed(c) : typeof c === "number" ? s.class(c) : s.classes.includes(c) ? c : undefined;
    const found = find(this.local) ?? find(this.remoteSchema);
    if (!found) throw new Error(`replica: ${typeof c === "object" ? c.name : c} is not a class of the replica's schema`);
    return found;
  }

  private add(c: StructType | string | number, i: number, fn: (...a: any[]) => void): () => void {
    const cls = this.classOf(c);
    let lists = this.classes.get(cls);
    if (!lists) this.classes.set(cls, (lists = []));
    const cb: Callback = { from: this.tick + 1, dead: false, fn };
    lists[i] = [...(lists[i] ?? []), cb]; // copy on write: dispatch may be iterating
    return () => {
      if (!cb.dead) lists[i] = lists[i]!.filter((x) => x !== cb);
      cb.dead = true;
    };
  }

  private onLeaf(c: StructType | string | number, leaf: string | number, fn: (...a: any[]) => void, op: string, want: (k: number) => boolean) {
    const cls = this.classOf(c);
    const l = typeof leaf === "number" ? cls.leaves[leaf] : cls.leafNamed(leaf);
    if (!l) throw new Error(`replica: ${op}: ${cls.name} has no leaf ${leaf}`);
    if (!want(l.field.type.kind)) throw new Error(`replica: ${op}: leaf ${l.name} of ${cls.name} is not of a kind ${op} handles`);
    this.tab.watchLeaf(cls, l.index);
    return this.add(cls, Ev.Field + l.index, fn);
  }

  /** Runs fn for each new entity of class c (a class, its name or its class ID). Returns an unregister function. */
  onCreate(c: StructType | string | number, fn: (e: Entity) => void): () => void {
    return this.add(c, Ev.Create, fn);
  }

  /** Runs fn for each destroyed entity of class c, as it was when destroyed. */
  onDestroy(c: StructType | string | number, fn: (e: Entity) => void): () => void {
    return this.add(c, Ev.Destroy, fn);
  }

  /** Runs fn when this client gains (owned) or loses ownership of an entity of class c. */
  onOwnership(c: StructType | string | number, fn: (e: Entity, owned: boolean) => void): () => void {
    return this.add(c, Ev.Owned, fn);
  }

  /**
   * Runs fn when the level of detail an entity of class c is held at
   * changes (§5.8), as the Go client's OnLevel. old and now are levels as
   * Entity.level holds them: 0..nbands, nbands meaning every band. fn sees
   * the entity with the whole tick applied: the fields of the bands it left
   * are zero, those of the bands it entered filled in.
   */
  onLevel(c: StructType | string | number, fn: (e: Entity, old: number, now: number) => void): () => void {
    return this.add(c, Ev.Level, fn);
  }

  /** Runs fn when a scalar leaf (dotted path or leaf index) of an entity of class c changes. */
  onField(c: StructType | string | number, leaf: string | number, fn: (e: Entity, old: unknown, now: unknown) => void): () => void {
    return this.onLeaf(c, leaf, fn, "onField", (k) => !isContainer(k));
  }

  /** Runs fn for each change to a list leaf. */
  onList(c: StructType | string | number, leaf: string | number, fn: (e: Entity, ev: ListEvent) => void): () => void {
    return this.onLeaf(c, leaf, fn, "onList", (k) => k === Kind.List);
  }

  /** Runs fn for each change to a map leaf. */
  onMap(c: StructType | string | number, leaf: string | number, fn: (e: Entity, ev: MapEvent) => void): () => void {
    return this.onLeaf(c, leaf, fn, "onMap", (k) => k === Kind.Map);
  }

  /** Runs fn for each change to a bag leaf, item field changes included. */
  onBag(c: StructType | string | number, leaf: string | number, fn: (e: Entity, ev: BagEvent) => void): () => void {
    return this.onLeaf(c, leaf, fn, "onBag", (k) => k === Kind.Bag);
  }

  private dispatch(events: TxEvent[]): void {
    if (this.classes.size === 0 || events.length === 0) return;
    this.dispatching = true;
    const tick = this.tick;
    try {
      for (const ev of events) {
        const list = this.classes.get(ev.e.type)?.[ev.kind < Ev.Field ? ev.kind : Ev.Field + ev.leaf];
        if (!list || list.length === 0) continue;
        const args = eventArgs(ev);
        for (const cb of list) if (cb.from <= tick && !cb.dead) cb.fn(...args);
      }
    } finally {
      this.dispatching = false;
    }
  }
}

const ITEM_KINDS: readonly ItemKind[] = ["added", "removed", "changed"];

/** A callback's arguments for an event. */
function eventArgs(ev: TxEvent): unknown[] {
  const { e, kind } = ev;
  if (kind < Ev.Owned) return [e];
  if (kind === Ev.Owned) return [e, ev.new];
  if (kind <= Ev.Field) return [e, ev.old, ev.new];
  // A ListEvent, MapEvent or BagEvent.
  const o: Record<string, unknown> = { kind: ITEM_KINDS[(kind - Ev.ListAdd) % 3] };
  if (kind <= Ev.ListSet) o.index = ev.index;
  else o.key = ev.key;
  if (kind >= Ev.BagAdd) {
    o.itemLeaf = ev.itemLeaf;
    o.item = (e.obj[e.type.leaves[ev.leaf]!.obj] as BagC).get(ev.key!);
    if (kind === Ev.BagAdd && ev.old) o.kind = "changed";
  }
  if (ev.old !== undefined) o.old = ev.old;
  if (ev.new !== undefined) o.new = ev.new;
  return [e, o];
}

const hex = (id: number): string => "0x" + (id >>> 0).toString(16);
