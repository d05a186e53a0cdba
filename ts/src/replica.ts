/**
 * A client's replica: the entities a server replicates to this client,
 * updated one tick at a time, atomically, with callbacks — the semantics
 * of the Go client (client/client.go, client/callbacks.go).
 *
 * Callbacks run after the whole tick is committed, in the order of the
 * tick's events and, for one event, in registration order. Each runs on
 * its own: one that throws is reported (Replica.onError) and the others
 * still run. A new entity
 * reports its onCreate callbacks, then each watched scalar leaf whose
 * initial value is not zero as a change from zero, and each item of its
 * watched containers as added. A rejected tick leaves the replica exactly
 * as it was and runs no callback.
 */

import { ReplicaDecodeError, fail, misuse } from "./errors.js";
import { decoder, type Decoder, type Limits } from "./decoder.js";
import { isContainer, type Schema, type StructType } from "./schema.js";
import { table, type BagC, type Entity, type Key, type Rec, type Table, type TxEvent } from "./state.js";
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

/** A class: the class itself, its name or its class ID. */
export type ClassRef = StructType | string | number;

/**
 * Receives an exception a callback threw (as thrown: an Error, unless the
 * callback threw something else) and which callback it was, as
 * "onCreate(Hero)", "onField(Hero, pos.x)", "onBag(Hero, inv)".
 */
export type ErrorHandler = (err: unknown, where: string) => void;

/** Reports err, thrown by callback where, to onError, or when there is none to console.error. */
export const report = (onError: ErrorHandler | undefined, err: unknown, where: string): void =>
  onError ? onError(err, where) : console.error(`replica: callback ${where} threw:`, err);

/** The registration a callback list of class c came from, as onError names it (list k as Callback lists are indexed). */
const callbackName = (c: StructType, k: number): string => {
  const l = c.leaves[k - Ev.Field];
  return l
    ? `on${["List", "Map", "Bag"][l.ty.kind - Kind.List] ?? "Field"}(${c.name}, ${l.name})`
    : `on${["Create", "Destroy", "Ownership", "Level"][k]}(${c.name})`;
};

interface Callback {
  /** The first tick it sees; Infinity once unregistered. */
  since: number;
  fn: (...args: any[]) => void;
}

/** A client's copy of the entities replicated to it. */
export class Replica {
  declare readonly local: Schema;
  /** The sender's schema. */
  declare remote: Schema;
  /** @internal The decoder (also of RPC arguments). */
  declare decoder: Decoder;
  /** @internal The entity table. */
  tab = table();
  /** Per class: callbacks by list, indexed as events (Ev): create, destroy, ownership, level, then Field + leaf. */
  private cbs = new Map<StructType, Callback[][]>();
  private dispatching = false;
  /** Ticks committed so far. */
  ticksApplied = 0;
  /**
   * Receives each exception a callback throws. Callbacks are isolated:
   * the tick is applied whatever they do, and one that throws does not
   * keep the others from running. Unset, an exception goes to
   * console.error, prefixed with "replica: callback onCreate(Hero)
   * threw:" (a Connection sends its replica's to its own onError, when
   * set). An onError that throws ends the tick's dispatch: that exception
   * propagates out of applyTick, the tick applied.
   */
  declare onError: ErrorHandler | undefined;

  constructor(local: Schema, opts: ReplicaOptions = {}) {
    this.local = local;
    this.decoder = decoder(local, (this.remote = opts.remote ?? local), opts.limits);
  }

  /** The decoder's limits, defaults filled in. */
  get limits(): Limits {
    return this.decoder.lim;
  }

  /** Number of entities. */
  get size(): number {
    return this.tab.size;
  }

  /** The entity with network ID id, or undefined. */
  entity(id: number): Entity | undefined {
    const e = this.tab.atSlot(id & 0xffffff);
    return e && e.id === id >>> 0 ? e : undefined;
  }

  /** Every entity, in ascending slot order. */
  entities(): Entity[] {
    return this.tab.held.map((s) => this.tab.atSlot(s)!);
  }

  /** The entities this client owns, in ascending slot order. */
  owned(): Entity[] {
    return this.entities().filter((e) => e.owned);
  }

  /** Applies one tick without ownership or level changes. */
  apply(...segments: Uint8Array[]): void {
    this.applyTick(segments);
  }

  /**
   * Applies one tick (§5.1, §5.8, §10.2): the TICK's ownership and level
   * changes, then its segments in order, in one transaction. Either all of
   * it applies and the callbacks run, or none of it: a ReplicaDecodeError
   * is thrown (its `segment` is the index of the bad segment, −1 for the
   * TICK's lists) and the replica is exactly as it was.
   */
  applyTick(segments: readonly Uint8Array[], changes: TickChanges = {}): void {
    const t = this.begin("applyTick");
    let seg = -1;
    const level = (e: Entity, l: number): number => (l > e.nbands ? fail("level", l + " > " + e.nbands) : l);
    try {
      // Lost entities must be owned, gained ones not; a gained one that is
      // not held yet must be created by the tick's segments.
      const created: number[] = [];
      [changes.lost, changes.gained].forEach((ids = [], own) => {
        for (const id of ids) {
          const e = this.entity(id);
          if (!e?.owned !== !!own) fail("ownership", (own ? "gained " : "lost ") + id);
          if (!e) created.push(id >>> 0);
          else {
            t.zeroLeaves(e, (l) => l.vis === (own ? Vis.Others : Vis.Owner));
            t.setOwned(e, !!own);
          }
        }
      });
      const later: LevelChange[] = [];
      const seen = new Set<number>();
      for (const lc of changes.levels ?? []) {
        const id = lc.id >>> 0;
        if (seen.size === seen.add(id).size) fail("level", id + " twice");
        const e = this.entity(id);
        if (!e) later.push(lc);
        else if (level(e, lc.level) < e.level) {
          t.zeroLeaves(e, (l) => e.bands[l.index]! > lc.level);
        } else if (lc.level > e.level) t.fillable.add(e.slot);
        if (e) t.setLevel(e, lc.level);
      }
      for (seg = 0; seg < segments.length; seg++) this.decoder.apply(t, segments[seg]!);
      seg = -1;
      for (const id of created) {
        const e = this.entity(id);
        if (!e || !t.fillable.has(e.slot) || e.owned) fail("ownership", "gained " + id + ", not received");
        t.setOwned(e!, true);
      }
      for (const lc of later) {
        const e = this.entity(lc.id) ?? fail("level", lc.id + " not received");
        t.setLevel(e, level(e, lc.level));
      }
    } catch (e) {
      t.rollback();
      if (e instanceof ReplicaDecodeError) e.segment = seg;
      throw e;
    }
    t.commit();
    this.ticksApplied++;
    this.dispatch(t.events);
  }

  /**
   * Empties the replica for a new session whose sender speaks remote
   * (default: the current remote schema): every entity is destroyed, with
   * onDestroy callbacks. Callbacks stay registered.
   */
  reset(remote: Schema = this.remote): void {
    const t = this.begin("reset");
    const dec = decoder(this.local, remote, this.decoder.lim);
    for (const e of this.entities()) t.destroySlot(e.slot);
    t.commit();
    this.decoder = dec;
    this.remote = remote;
    this.dispatch(t.events);
  }

  /** Runs fn for each new entity of class c (a class, its name or its class ID). Returns an unregister function. */
  onCreate(c: ClassRef, fn: (e: Entity) => void): () => void {
    return this.listen(c, Ev.Create, fn);
  }

  /** Runs fn for each destroyed entity of class c, as it was when destroyed. */
  onDestroy(c: ClassRef, fn: (e: Entity) => void): () => void {
    return this.listen(c, Ev.Destroy, fn);
  }

  /** Runs fn when this client gains (owned) or loses ownership of an entity of class c. */
  onOwnership(c: ClassRef, fn: (e: Entity, owned: boolean) => void): () => void {
    return this.listen(c, Ev.Owned, fn);
  }

  /**
   * Runs fn when the level of detail an entity of class c is held at
   * changes (§5.8), as the Go client's OnLevel. old and now are levels as
   * Entity.level holds them: 0..nbands, nbands meaning every band. fn sees
   * the entity with the whole tick applied: the fields of the bands it left
   * are zero, those of the bands it entered filled in.
   */
  onLevel(c: ClassRef, fn: (e: Entity, old: number, now: number) => void): () => void {
    return this.listen(c, Ev.Level, fn);
  }

  /** Runs fn when a scalar leaf (dotted path or leaf index) of an entity of class c changes. */
  onField(c: ClassRef, leaf: string | number, fn: (e: Entity, old: unknown, now: unknown) => void): () => void {
    return this.listen(c, Ev.Field, fn, leaf);
  }

  /** Runs fn for each change to a list leaf. */
  onList(c: ClassRef, leaf: string | number, fn: (e: Entity, ev: ListEvent) => void): () => void {
    return this.listen(c, Ev.Field, fn, leaf, Kind.List);
  }

  /** Runs fn for each change to a map leaf. */
  onMap(c: ClassRef, leaf: string | number, fn: (e: Entity, ev: MapEvent) => void): () => void {
    return this.listen(c, Ev.Field, fn, leaf, Kind.Map);
  }

  /** Runs fn for each change to a bag leaf, item field changes included. */
  onBag(c: ClassRef, leaf: string | number, fn: (e: Entity, ev: BagEvent) => void): () => void {
    return this.listen(c, Ev.Field, fn, leaf, Kind.Bag);
  }

  /** The table's transaction, unless a callback is running. */
  private begin(what: string): Table {
    return this.dispatching ? misuse(what + " from a callback") : this.tab.begin();
  }

  private dispatch(events: TxEvent[]): void {
    if (!this.cbs.size) return;
    this.dispatching = true;
    try {
      for (const { k, e, a } of events) {
        const list = this.cbs.get(e.type)?.[k];
        const ev = a[1] as BagEvent;
        // A bag event reports the item under its key once the tick is applied.
        if (list && ev?.itemLeaf !== undefined) ev.item = (e.obj[e.type.leaves[k - Ev.Field]!.obj] as BagC).get(ev.key);
        for (const cb of list ?? []) {
          if (cb.since <= this.ticksApplied) {
            try {
              cb.fn(...a);
            } catch (err) {
              report(this.onError, err, callbackName(e.type, k));
            }
          }
        }
      }
    } finally {
      this.dispatching = false;
    }
  }

  /**
   * Adds fn to the callbacks of class c at list i, or of its leaf (a dotted
   * path or a leaf index) when leaf is given, which must be a container of
   * kind want, or not a container when want is 0.
   */
  private listen(c: ClassRef, i: number, fn: (...a: any[]) => void, leaf?: string | number, want = 0): () => void {
    const cls = this.local.lookup(c) ?? this.remote.lookup(c) ?? misuse("no class " + ((c as StructType).name ?? c));
    if (leaf !== undefined) {
      const l = (typeof leaf === "number" ? cls.leaves[leaf] : cls.leafNamed(leaf)) ?? misuse(`${cls.name} has no leaf ${leaf}`);
      const k = l.ty.kind;
      if (want ? k !== want : isContainer(k)) misuse(`${cls.name}.${l.name}: wrong kind`);
      this.tab.watchLeaf(cls, l.index);
      i += l.index;
    }
    const cbs = this.cbs;
    let lists = cbs.get(cls);
    if (!lists) cbs.set(cls, (lists = []));
    const cb: Callback = { since: this.ticksApplied + 1, fn };
    lists[i] = [...(lists[i] ?? []), cb]; // copy on write: dispatch may be iterating
    return () => {
      lists[i] = lists[i]!.filter((x) => x !== cb);
      cb.since = Infinity;
    };
  }
}
