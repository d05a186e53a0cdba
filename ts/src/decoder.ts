/**
 * The segment decoder (docs/protocol.md §5–§8): parses segments with the
 * sender's (remote) schema and applies them, through a transaction, to
 * entities of the receiver's (local) schema.
 *
 * Every value is read through one table: a field tree (§5.5) becomes a
 * list of steps, one per leaf, each resolved once to how its value is read
 * and where it is stored locally; entities, records and container items
 * all go through it.
 */

import { EMPTY, MASK, bits, bitsWide, bool, bytes, compareBytes, count, decodeUTF8, finish, hi, load, malformed, pos, string, u, u32 } from "./bits.js";
import { ReplicaDecodeError, fail } from "./errors.js";
import { checkCompatible, isContainer, isNumeric, kindType, type Schema, type StructType, type Type } from "./schema.js";
import { BagC, ListC, MapC, Rec, clone, makeId, type Elem, type Entity, type Key, type Table } from "./state.js";
import { decodeDelta, decodeFull, numPlan, out, toElem, type NumPlan } from "./values.js";
import { Kind } from "./enums.js";

// The decoder's numbers: enums of this module, which esbuild inlines (an
// imported binding would be a load and a check per use where modules are
// not bundled, in Node and vitest).

/** Section tags (§5.2); Ranked: an update naming entities by rank among those held when the tick began (§5.4). */
const enum Sec {
  End = 0,
  Create = 1,
  Update = 2,
  Destroy = 3,
  Fill = 4,
  Ranked = 6,
}

/** List operation codes (§6.2). */
const enum Op {
  Push = 0,
  Insert = 1,
  Remove = 2,
  Set = 3,
  Clear = 4,
  Patch = 5,
}

/**
 * How a step's value is read: raw bits; a U(k) delta of a number whose
 * delta width is at most 32 (not a ref); a U(k) full value, a wide delta or
 * a ref's delta; a string or bytes; a container.
 */
const enum P {
  Raw = 1,
  Delta = 2,
  U = 3,
  Str = 4,
  Cont = 5,
}

/** Decoder limits (§7.1). A zero or absent field selects the default. */
export interface Limits {
  maxSegmentBytes: number;
  maxStringBytes: number;
  maxContainerLen: number;
  maxDepth: number;
  maxEntities: number;
  maxValues: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxSegmentBytes: 4 << 20,
  maxStringBytes: 64 << 10,
  maxContainerLen: 1 << 16,
  maxDepth: 16,
  maxEntities: 1 << 16,
  maxValues: 1 << 20,
});

/** The limit names in the order HELLO carries them (§10.2). */
export const LIMIT_ORDER = Object.keys(DEFAULT_LIMITS) as readonly (keyof Limits)[];

/** l with every zero or absent field set to its default. */
export const withDefaults = (l: Partial<Limits> = {}): Limits => {
  const r = { ...DEFAULT_LIMITS };
  for (const k of LIMIT_ORDER) if (l[k]! > 0) r[k] = l[k]!;
  return r;
};

/** One leaf of a field tree, resolved for reading. */
interface Step {
  /** The local leaf, or −1 when the value is skipped. */
  to: number;
  /** The local numeric or object slot, or −1. */
  sl: number;
  /** How the value is read. */
  how: P;
  /** U(k)'s k, or the raw width for P.Raw. */
  k: number;
  /** The remote type, and the local one (null when skipped). */
  t: Type;
  lt: Type | null;
  plan: NumPlan;
  // P.Delta: the largest code, 32 − D, and whether S is signed.
  mask: number;
  sh: number;
  signed: boolean;
}

/** Per (remote struct, local struct): remote leaf → local leaf, or −1; and local leaf → sender's band. */
interface Mapping {
  toLocal: Int32Array;
  bands: Uint8Array;
}

/** What values() writes a new record through: its slots, directly. */
const DIRECT = {
  setNum(_e: Entity, _l: number, slot: number, lo: number, hi: number, r: Rec): void {
    r.num[slot << 1] = lo;
    r.num[(slot << 1) + 1] = hi;
  },
  setObj(_e: Entity, _l: number, slot: number, v: unknown, r: Rec): void {
    r.obj[slot] = v;
  },
} as Table;

/** Decodes segments of the remote schema into a local replica. */
export interface Decoder {
  /** The limits, defaults filled in. */
  readonly lim: Limits;
  /**
   * Decodes one segment into tab's transaction. On error (a
   * ReplicaDecodeError) the transaction holds a partial tick: the caller
   * rolls it back.
   */
  apply(tab: Table, seg: Uint8Array): void;
  /**
   * Decodes a standalone record (an RPC's arguments, §10.2) of remote
   * struct rs into a new record of local struct ls.
   */
  decodeRecord(rs: StructType, ls: StructType, data: Uint8Array): Rec;
}

/**
 * A decoder of segments of schema remote into entities of schema local;
 * throws an "incompatible" ReplicaDecodeError when remote's data cannot be
 * decoded into local (§8).
 */
export const decoder = (local: Schema, remote: Schema = local, limits: Partial<Limits> = {}): Decoder => {
  const lim = withDefaults(limits);
  const { maxStringBytes, maxContainerLen: max } = lim;
  checkCompatible(local, remote);
  const maps = new Map<StructType, Map<StructType, Mapping>>();
  const steps: Step[] = [];
  // The slots of the last ID block: ids[0, nids) (cleared by count, so that
  // the array keeps its size from group to group).
  const ids: number[] = [];
  let nids = 0;
  const gens: number[] = [];
  let nEntities = 0;
  let nValues = 0;
  let keyBytes: Uint8Array;

  const bad = (what: unknown): never => malformed("" + what);
  /** u(k), which must fit 32 bits and be at most m. */
  const bounded = (k: number, m = 2 ** 32): number => {
    const v = u(k);
    return hi || v > m ? bad("value " + v) : v;
  };

  /** Leaf mapping of remote struct rs onto local struct ls (§8), by field ID path. */
  const mapping = (rs: StructType, ls: StructType): Mapping => {
    let inner = maps.get(rs);
    if (!inner) maps.set(rs, (inner = new Map()));
    let m = inner.get(ls);
    if (!m) {
      const byPath = new Map(ls.leaves.map((l) => [l.path, l.index]));
      inner.set(ls, (m = { toLocal: new Int32Array(rs.leaves.length), bands: new Uint8Array(ls.leaves.length) }));
      for (const l of rs.leaves) {
        const j = (m.toLocal[l.index] = byPath.get(l.path) ?? -1);
        if (j >= 0) m.bands[j] = l.band;
      }
    }
    return m;
  };

  /** Reads an entity ID block (§5.4) into ids[0, nids). */
  const readIDs = (): void => {
    const n = (nids = count(3, lim.maxEntities - nEntities, 1, "entities"));
    nEntities += n;
    const k = bits(6);
    for (let i = 0, slot = -1; i < n; i++) ids[i] = slot += 1 + bounded(k, 0xffffff - 1 - slot);
  };

  const group = (tab: Table, tag: number, rc: StructType): void => {
    const lc = local.class(rc.classId) ?? rc;
    const map = mapping(rc, lc);
    const delta = tag === Sec.Update || tag === Sec.Ranked;
    steps.length = 0;
    readTree(rc, 0, delta, 0, tag === Sec.Ranked ? 0 : 2, map, lc);
    readIDs();
    const n = nids;
    if (tag === Sec.Ranked) {
      // Ranks among the entities held when the tick began (§5.4).
      for (let i = 0; i < n; i++) ids[i] = tab.held[ids[i]!] ?? fail("rank", "" + ids[i]);
    } else if (tag === Sec.Create) {
      const k = bits(6);
      for (let i = 0; i < n; i++) gens[i] = bounded(k, 255);
    }
    for (let i = 0; i < n; i++) {
      const slot = ids[i]!;
      let e: Entity | undefined;
      if (tag === Sec.Create) e = tab.create(lc, makeId(slot, gens[i]!), rc.classId, rc.nbands ? map.bands : EMPTY, rc.nbands);
      else if (!(e = tab.atSlot(slot)) || (tag === Sec.Fill && !tab.fillable.has(slot))) fail("not-found", "slot " + slot);
      if (e!.classId !== rc.classId) bad("class of " + slot);
      values(tab, e!, e!, 0, delta, 0);
    }
  };

  const deeper = (depth: number): void => {
    if (depth >= lim.maxDepth) fail("limit", "depth");
  };

  /**
   * Reads a field tree of remote struct st (§5.5) into steps, resolved
   * against local struct ls through map. base is the leaf index of st's
   * first leaf; field-ID gaps are U(gapK) codes: U(2), but U(0) in ranked
   * update sections.
   */
  const readTree = (st: StructType, base: number, delta: boolean, depth: number, gapK: number, map: Mapping, ls: StructType): void => {
    deeper(depth);
    for (let n = count(2, st.fields.length, 2, "fields"), id = 0; n > 0; n--) {
      id += 1 + u(gapK) + hi * 2 ** 32;
      const f = st.field(id);
      if (!f || f.deprecated) fail("unknown", "field " + id);
      const t = f!.type;
      const kind = t.kind;
      const leaf = base + f!.leaf;
      if (kind === Kind.Nested) {
        readTree(t.struct!, leaf, delta, depth + 1, gapK, map, ls);
        continue;
      }
      const to = map.toLocal[leaf]!;
      const ll = to < 0 ? null : ls.leaves[to]!;
      const p = numPlan(t);
      const numeric = isNumeric(kind);
      let k = numeric ? (delta ? p.deltaRaw : p.fullRaw) : 0;
      const how = !numeric ? (isContainer(kind) ? P.Cont : P.Str) : k ? P.Raw : ((k = bits(6)), delta && p.W <= 32 && kind !== Kind.Ref ? P.Delta : P.U);
      // mask, sh and signed serve P.Delta; they are numbers for every step, as the hot loop reads them.
      steps.push({ to, sl: ll ? (numeric ? ll.num : ll.obj) : -1, how, k, t, lt: ll && ll.ty, plan: p, mask: MASK[p.W] ?? 0, sh: 32 - p.W, signed: p.signed });
    }
  };

  /** Reads into out a number of plan p: a full value, or a delta to (olo, ohi). */
  const readNum = (p: NumPlan, k: number, delta: boolean, olo = 0, ohi = 0): void => {
    const lo = u(k);
    if (!(delta ? decodeDelta(p, olo, ohi, lo, hi) : decodeFull(p, lo, hi))) bad("value " + lo);
  };

  /**
   * Reads the values of steps[from, …) into rec: an entity's (rec is e), a
   * bag item's (rec, under key k of e's bag at leaf bagLeaf) through tab's
   * transaction, or a new record's (tab is DIRECT). depth is rec's.
   */
  const values = (tab: Table, e: Entity, rec: Rec, from: number, delta: boolean, depth: number, k?: Key, bagLeaf?: number): void => {
    const a = rec.num;
    for (let i = from; i < steps.length; i++) {
      const s = steps[i]!;
      const slot = s.sl;
      const j = slot << 1;
      // A number's new value, as halves (lo, h), set after the switch.
      let lo: number;
      let h = 0;
      switch (s.how) {
        case P.Delta: {
          const d = u(s.k);
          if (hi !== 0 || d > s.mask) bad("delta");
          if (slot < 0) continue;
          const v = a[j]! + ((d >>> 1) ^ -(d & 1));
          if (s.signed) {
            lo = (v << s.sh) >> s.sh;
            h = lo < 0 ? 0xffffffff : 0;
            lo >>>= 0;
          } else lo = s.sh === 0 ? v >>> 0 : v & s.mask;
          break;
        }
        case P.Raw:
          lo = bitsWide(s.k);
          h = hi;
          break;
        case P.U:
          readNum(s.plan, s.k, delta, a[j], a[j + 1]);
          lo = out.lo;
          h = out.hi;
          break;
        default: {
          // A string, bytes, or a container: whole, or its operations.
          let v: unknown;
          if (s.how === P.Str) v = readStr(s.t);
          else if (!delta || bool()) v = readContainer(s.t, s.lt, depth + 1);
          else {
            containerOps(tab, e, s.t, s.lt, s.to, slot);
            continue;
          }
          if (slot >= 0) tab.setObj(e, s.to, slot, v, rec, k, bagLeaf);
          continue;
        }
      }
      if (slot >= 0) tab.setNum(e, s.to, slot, lo, h, rec, k, bagLeaf);
    }
  };

  const readStr = (t: Type): string | Uint8Array => {
    return t.kind === Kind.Bytes ? bytes(maxStringBytes) : string(maxStringBytes);
  };

  /** Reads a count of values (a container's length, its operations or keys), at least minBits each. */
  const countValues = (k: number, minBits: number): number => addValues(count(k, max, minBits, "length"));

  /** Counts n more values against maxValues; returns n. */
  const addValues = (n: number): number => ((nValues += n) > lim.maxValues ? fail("limit", "values") : n);

  /** Reads one element of remote type t; lt is the local element type, or null when skipped. */
  const readElem = (t: Type, lt: Type | null, k: number, depth: number): Elem => {
    if (isNumeric(t.kind)) {
      const p = numPlan(t);
      if (p.fullRaw) {
        out.lo = bitsWide(p.fullRaw);
        out.hi = hi;
      } else readNum(p, k, false);
      return toElem(p, out.lo, out.hi);
    }
    return t.kind === Kind.Nested ? readRecord(t.struct!, lt && lt.struct, depth + 1) : readStr(t);
  };

  /** Reads the shared k of a sequence of n elements of type t, if any (§6.1). */
  const readK = (t: Type, n: number): number => {
    return n && isNumeric(t.kind) && !numPlan(t).fullRaw ? bits(6) : 0;
  };

  /** Reads a key of kind key (§6.1). For string keys, the bytes are left in keyBytes. */
  const readKey = (key: number, k: number): Key => {
    return key === Kind.String
      ? decodeUTF8((keyBytes = bytes(maxStringBytes)))
      : (readElem((keyTypes[key] ??= kindType(key)), null, k, 0) as number | bigint);
  };

  /** Reads a whole container of remote type t, as a container of local type lt (t when skipped). */
  const readContainer = (t: Type, lt: Type | null, depth: number): ListC | MapC | BagC => {
    deeper(depth);
    const ct = lt ?? t;
    const n = countValues(4, 1);
    if (t.kind === Kind.List) {
      const el = t.elem!;
      const k = readK(el, n);
      const items: Elem[] = new Array(n);
      for (let i = 0; i < n; i++) items[i] = readElem(el, lt && lt.elem, k, depth);
      return new ListC(ct, items);
    }
    const m = new Map<Key, Elem>();
    entries(t, lt, n, 2, depth, (key, v) => m.set(key, v!));
    return new (t.kind === Kind.Bag ? BagC : MapC)(ct, m);
  };

  /**
   * Reads n keys of map or bag type t (lt locally, null when skipped) and
   * gives each to f: a whole container's (§6.1; how 2: with its value, the
   * keys strictly ascending), or those of a pass of its operations (§6.2):
   * with their values (how 1: put), or alone (how 0: removed keys, and
   * updated bag items, whose records f reads).
   */
  const entries = (t: Type, lt: Type | null, n: number, how: number, depth: number, f: (key: Key, v?: Elem) => void): void => {
    const bag = t.kind === Kind.Bag;
    const str = t.key === Kind.String;
    const kk = n && !str ? bits(6) : 0;
    const vk = how && !bag ? readK(t.elem!, n) : 0;
    let prev: Key | undefined;
    let prevBytes!: Uint8Array;
    for (let i = 0; i < n; i++) {
      const key = readKey(t.key, kk);
      // Strings compare bytewise.
      if (how > 1 && i && !(str ? compareBytes(prevBytes, keyBytes) < 0 : prev! < key)) bad("key order");
      prev = key;
      prevBytes = keyBytes;
      f(key, !how ? undefined : bag ? readRecord(t.struct!, lt && lt.struct, depth + 1) : readElem(t.elem!, lt && lt.elem, vk, depth));
    }
  };

  /**
   * Reads a standalone struct value of remote type rs into a record of
   * local type ls (rs when null): into, or a new one. A bag item of e (into,
   * under key k of e's bag at leaf bagLeaf) is written through tab's
   * transaction.
   */
  const readRecord = (rs: StructType, ls: StructType | null, depth: number, into?: Rec, tab = DIRECT, e?: Entity, k?: Key, bagLeaf?: number): Rec => {
    deeper(depth);
    addValues(1);
    const lst = ls ?? rs;
    const rec = into ?? new Rec(lst);
    const start = steps.length;
    readTree(rs, 0, false, depth, 2, mapping(rs, lst), lst);
    values(tab, e!, rec, start, false, depth, k, bagLeaf);
    steps.length = start;
    return rec;
  };

  /** Reads and applies the operations on one container of e (§6.2); local is −1 when it is skipped. */
  const containerOps = (tab: Table, e: Entity, t: Type, lt: Type | null, local: number, slot: number): undefined => {
    const full = (size: number): void => {
      if (size >= max) fail("limit", "length");
    };
    const c = local < 0 ? null : (e.obj[slot] as ListC & MapC);
    const el = t.elem!;
    const lel = lt && lt.elem;
    if (t.kind === Kind.List) {
      const n = countValues(2, 3);
      const k = readK(el, n);
      for (let i = 0; i < n; i++) {
        const op = bits(3);
        if (op > Op.Patch || (op === Op.Patch && el.kind !== Kind.Nested)) bad("list operation " + op);
        const idx = op === Op.Push || op === Op.Clear ? 0 : Math.min(u(4), max + 1) + (hi && max + 1);
        const items = c && c.items;
        let v: Elem | undefined;
        if (op === Op.Patch) {
          // A patch of struct element idx: applied to a copy, which replaces it.
          const rs = el.struct!;
          const ls = lel ? lel.struct! : rs;
          if (items && idx >= items.length) fail("index", idx + " of " + items.length);
          v = readRecord(rs, ls, 2, items ? clone(items[idx] as Rec) : new Rec(ls));
        } else if (op <= Op.Insert || op === Op.Set) v = readElem(el, lel, k, 1);
        if (!items) continue;
        if (op <= Op.Insert) full(items.length);
        // Table.listOp's codes: insert, remove, set (a patch too), clear.
        tab.listOp(e, local, c, op <= Op.Insert ? 0 : op === Op.Patch ? 2 : op - 1, op === Op.Push ? items.length : idx, v);
      }
      return;
    }
    // Maps: removed keys, then put entries; bags: removed keys, put items, item updates.
    for (let pass = 0; pass < 2 + +(t.kind === Kind.Bag); pass++) {
      entries(t, lt, countValues(2, 1), pass & 1, 1, (key, v) => {
        if (pass > 1) {
          if (c) readRecord(t.struct!, lt!.struct, 2, (c as BagC).m.get(key) ?? fail("no-key", "" + key), tab, e, key, local);
          else readRecord(t.struct!, null, 2);
        } else if (c) {
          if (pass) full(c.m.size);
          tab.mapOp(e, local, c, key, v);
        }
      });
    }
  };

  return {
    lim,

    apply(tab, seg) {
      if (seg.length > lim.maxSegmentBytes) fail("limit", "segment", 0);
      load(seg);
      nEntities = nValues = 0;
      try {
        for (let tag; (tag = bits(3)) !== Sec.End; ) {
          if (tag === Sec.Destroy) {
            readIDs();
            for (let i = 0; i < nids; i++) tab.destroySlot(ids[i]!);
            continue;
          }
          if (tag > Sec.Ranked) bad("section " + tag);
          const rc = remote.class(u32(4)) ?? fail("unknown", "class");
          for (let g = count(0, lim.maxEntities, 8, "groups"); g > 0; g--) group(tab, tag, rc);
        }
        finish();
      } catch (e) {
        if (e instanceof ReplicaDecodeError && e.bit < 0) e.bit = pos;
        // A maxDepth set beyond what the JS stack holds: still a typed rejection.
        throw e instanceof RangeError ? new ReplicaDecodeError("limit", "depth beyond the stack", pos) : e;
      }
    },

    decodeRecord(rs, ls, data) {
      if (data.length > lim.maxSegmentBytes) fail("limit", "record");
      load(data);
      nValues = steps.length = 0;
      const rec = readRecord(rs, ls, 0);
      finish();
      return rec;
    },
  };
};

/** The types of map and bag keys, by kind. */
const keyTypes: Type[] = [];
