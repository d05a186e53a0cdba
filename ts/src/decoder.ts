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

import { BitReader, MASK, decodeUTF8 } from "./bits.js";
import { ReplicaDecodeError, fail } from "./errors.js";
import { checkCompatible, isContainer, isNumeric, NO_QUANT, type Schema, type StructType, type Type } from "./schema.js";
import { BagC, ListC, MapC, Rec, clone, makeId, type Elem, type Entity, type Key, type Table } from "./state.js";
import { decodeDelta, decodeFull, numPlan, out, toElem, type NumPlan } from "./values.js";
import { Kind } from "./enums.js";

// The decoder's numbers are constants of this module, not imports: an
// imported binding is a load and a check in every use where modules are
// not bundled (Node, vitest), and these are used per value.

// Section tags (§5.2).
const SEC_END = 0;
const SEC_CREATE = 1;
const SEC_UPDATE = 2;
const SEC_DESTROY = 3;
const SEC_FILL = 4;
/** An update naming entities by rank among those held when the tick began (§5.4). */
const SEC_RANKED = 6;

// List operation codes (§6.2).
const OP_PUSH = 0;
const OP_INSERT = 1;
const OP_REMOVE = 2;
const OP_SET = 3;
const OP_CLEAR = 4;
const OP_PATCH = 5;

// How a step's value is read.
/** Raw bits. */
const P_RAW = 1;
/** A U(k) delta of a number whose delta width is at most 32 (not a ref). */
const P_DELTA = 2;
/** A U(k) full value, a wide delta, or a ref's delta. */
const P_U = 3;
const P_STR = 4;
const P_CONT = 5;

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
export function withDefaults(l: Partial<Limits> = {}): Limits {
  const r = { ...DEFAULT_LIMITS };
  for (const k of LIMIT_ORDER) if (l[k]! > 0) r[k] = l[k]!;
  return r;
}

/** One leaf of a field tree, resolved for reading. */
interface Step {
  /** The local leaf, or −1 when the value is skipped. */
  to: number;
  /** The local numeric or object slot, or −1. */
  sl: number;
  /** P_RAW, P_DELTA, P_U, P_STR or P_CONT. */
  how: number;
  /** U(k)'s k, or the raw width for P_RAW. */
  k: number;
  /** The remote type, and the local one (null when skipped). */
  t: Type;
  lt: Type | null;
  plan: NumPlan | null;
  // P_DELTA: the largest code, 32 − D, and whether S is signed.
  mask: number;
  sh: number;
  signed: boolean;
}

/** Per (remote struct, local struct): remote leaf → local leaf, or −1; and local leaf → sender's band. */
interface Mapping {
  toLocal: Int32Array;
  bands: Uint8Array;
}

const ZERO_BANDS = new Uint8Array(0);

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
export function decoder(local: Schema, remote: Schema = local, limits: Partial<Limits> = {}): Decoder {
  const lim = withDefaults(limits);
  checkCompatible(local, remote);
  const r = new BitReader();
  const maps = new Map<StructType, Map<StructType, Mapping>>();
  const steps: Step[] = [];
  // The slots of the last ID block: ids[0, nids) (cleared by count, so that
  // the array keeps its size from group to group).
  const ids: number[] = [];
  let nids = 0;
  const gens: number[] = [];
  let nEntities = 0;
  let nValues = 0;
  let keyBytes: Uint8Array | null = null;

  /** Leaf mapping of remote struct rs onto local struct ls (§8), by field ID path. */
  function mapping(rs: StructType, ls: StructType): Mapping {
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
  }

  /**
   * Decodes one segment into tab's transaction. On error (a
   * ReplicaDecodeError) the transaction holds a partial tick: the caller
   * rolls it back.
   */
  function apply(tab: Table, seg: Uint8Array): void {
    if (seg.length > lim.maxSegmentBytes) fail("limit", `segment of ${seg.length} bytes`, 0);
    r.reset(seg);
    nEntities = nValues = 0;
    try {
      for (let tag; (tag = r.bits(3)) !== SEC_END; ) {
        if (tag === SEC_DESTROY) {
          readIDs();
          for (let i = 0; i < nids; i++) tab.destroySlot(ids[i]!);
          continue;
        }
        if (tag > SEC_RANKED) r.malformed("section " + tag);
        const rc = remote.class(r.u32(4)) ?? fail("unknown", "class");
        for (let g = r.count(0, lim.maxEntities, 8, "groups"); g > 0; g--) group(tab, tag, rc);
      }
      r.finish();
    } catch (e) {
      if (e instanceof ReplicaDecodeError && e.bit < 0) e.bit = r.pos;
      // A maxDepth set beyond what the JS stack holds: still a typed rejection.
      throw e instanceof RangeError ? new ReplicaDecodeError("limit", "nesting deeper than the stack allows", r.pos) : e;
    }
  }

  /** Reads an entity ID block (§5.4) into ids[0, nids). */
  function readIDs(): void {
    const n = r.count(3, lim.maxEntities - nEntities, 1, "entities");
    nEntities += n;
    const k = r.bits(6);
    for (let i = 0, slot = -1; i < n; i++) {
      slot += 1 + r.u(k);
      if (r.hi !== 0 || slot >= 1 << 24) r.malformed("slot out of range");
      ids[i] = slot;
    }
    nids = n;
  }

  function group(tab: Table, tag: number, rc: StructType): void {
    const lc = local.class(rc.classId) ?? rc;
    const map = mapping(rc, lc);
    const delta = tag === SEC_UPDATE || tag === SEC_RANKED;
    steps.length = 0;
    readTree(rc, 0, delta, 0, tag === SEC_RANKED ? 0 : 2, map, lc);
    readIDs();
    const n = nids;
    if (tag === SEC_RANKED) {
      // Ranks among the entities held when the tick began (§5.4).
      for (let i = 0; i < n; i++) ids[i] = tab.held[ids[i]!] ?? fail("rank", "rank " + ids[i]);
    } else if (tag === SEC_CREATE) {
      const k = r.bits(6);
      for (let i = 0; i < n; i++) {
        const g = r.u(k);
        if (r.hi !== 0 || g > 255) r.malformed("generation " + g);
        gens[i] = g;
      }
    }
    for (let i = 0; i < n; i++) {
      const slot = ids[i]!;
      let e: Entity | undefined;
      if (tag === SEC_CREATE) e = tab.create(lc, makeId(slot, gens[i]!), rc.classId, rc.nbands === 0 ? ZERO_BANDS : map.bands, rc.nbands);
      else if (!(e = tab.atSlot(slot)) || (tag === SEC_FILL && !tab.fillable.has(slot))) fail("not-found", `section ${tag}, slot ${slot}`);
      if (e!.classId !== rc.classId) r.malformed(`slot ${slot} of class ${e!.classId}`);
      values(tab, e!, e!, 0, delta, 0);
    }
  }

  function deeper(depth: number): void {
    if (depth >= lim.maxDepth) fail("limit", "nesting deeper than " + lim.maxDepth);
  }

  /**
   * Reads a field tree of remote struct st (§5.5) into steps, resolved
   * against local struct ls through map. base is the leaf index of st's
   * first leaf; field-ID gaps are U(gapK) codes: U(2), but U(0) in ranked
   * update sections.
   */
  function readTree(st: StructType, base: number, delta: boolean, depth: number, gapK: number, map: Mapping, ls: StructType): void {
    deeper(depth);
    for (let n = r.count(2, st.fields.length, 2, "fields"), id = 0; n > 0; n--) {
      id += 1 + r.u(gapK) + r.hi * 4294967296;
      const f = st.field(id);
      if (!f || f.deprecated) fail("unknown", "field " + id);
      const t = f!.type;
      const leaf = base + f!.leaf;
      if (t.kind === Kind.Nested) {
        readTree(t.struct!, leaf, delta, depth + 1, gapK, map, ls);
        continue;
      }
      const local = map.toLocal[leaf]!;
      const ll = local >= 0 ? ls.leaves[local]! : null;
      const s: Step = { to: local, sl: -1, how: P_STR, k: 0, t, lt: ll && ll.field.type, plan: null, mask: 0, sh: 0, signed: false };
      if (isNumeric(t.kind)) {
        const p = (s.plan = numPlan(t));
        const raw = delta ? p.deltaRaw : p.fullRaw;
        s.how = P_RAW;
        s.k = raw;
        if (raw === 0) {
          s.k = r.bits(6);
          s.how = P_U;
          if (delta && p.D <= 32 && t.kind !== Kind.Ref) {
            s.how = P_DELTA;
            s.mask = MASK[p.D]!;
            s.sh = 32 - p.D;
            s.signed = p.signed;
          }
        }
        if (ll) s.sl = ll.num;
      } else {
        if (isContainer(t.kind)) s.how = P_CONT;
        if (ll) s.sl = ll.obj;
      }
      steps.push(s);
    }
  }

  /** Reads into out a number of plan p: a full value, or a delta to (olo, ohi). */
  function readNum(p: NumPlan, k: number, delta: boolean, olo = 0, ohi = 0): void {
    const lo = r.u(k);
    if (!(delta ? decodeDelta(p, olo, ohi, lo, r.hi) : decodeFull(p, lo, r.hi))) r.malformed("value out of range");
  }

  /**
   * Reads the values of steps[from, …) into rec: an entity's (rec is e), a
   * bag item's (rec, under key k of e's bag at leaf bagLeaf) through tab's
   * transaction, or a new record's (tab is DIRECT). depth is rec's.
   */
  function values(tab: Table, e: Entity, rec: Rec, from: number, delta: boolean, depth: number, k?: Key, bagLeaf?: number): void {
    const a = rec.num;
    for (let i = from; i < steps.length; i++) {
      const s = steps[i]!;
      const slot = s.sl;
      const j = slot << 1;
      switch (s.how) {
        case P_DELTA: {
          // D ≤ 32: plain number arithmetic (§4.3).
          const lo = r.u(s.k);
          if (r.hi !== 0 || lo > s.mask) r.malformed("delta out of range");
          if (slot < 0) break;
          let v = a[j]! + ((lo >>> 1) ^ -(lo & 1));
          if (s.signed) {
            v = (v << s.sh) >> s.sh;
            tab.setNum(e, s.to, slot, v >>> 0, v < 0 ? 0xffffffff : 0, rec, k, bagLeaf);
          } else tab.setNum(e, s.to, slot, s.sh === 0 ? v >>> 0 : v & s.mask, 0, rec, k, bagLeaf);
          break;
        }
        case P_RAW: {
          const lo = r.bitsWide(s.k);
          if (slot >= 0) tab.setNum(e, s.to, slot, lo, r.hi, rec, k, bagLeaf);
          break;
        }
        case P_U:
          if (slot < 0) readNum(s.plan!, s.k, delta);
          else {
            readNum(s.plan!, s.k, delta, a[j], a[j + 1]);
            tab.setNum(e, s.to, slot, out.lo, out.hi, rec, k, bagLeaf);
          }
          break;
        case P_STR: {
          const v = readStr(s.t);
          if (slot >= 0) tab.setObj(e, s.to, slot, v, rec, k, bagLeaf);
          break;
        }
        default:
          if (!delta || r.bool()) {
            const c = readContainer(s.t, s.lt, depth + 1);
            if (slot >= 0) tab.setObj(e, s.to, slot, c, rec, k, bagLeaf);
          } else containerOps(tab, e, s.t, s.lt, s.to, slot);
      }
    }
  }

  function readStr(t: Type): string | Uint8Array {
    return t.kind === Kind.Bytes ? r.bytes(lim.maxStringBytes) : r.string(lim.maxStringBytes);
  }

  function countValues(n: number): void {
    if ((nValues += n) > lim.maxValues) fail("limit", `over ${lim.maxValues} values`);
  }

  /** Reads one element of remote type t; lt is the local element type, or null when skipped. */
  function readElem(t: Type, lt: Type | null, k: number, depth: number): Elem {
    if (isNumeric(t.kind)) {
      const p = numPlan(t);
      if (p.fullRaw) {
        out.lo = r.bitsWide(p.fullRaw);
        out.hi = r.hi;
      } else readNum(p, k, false);
      return toElem(p, out.lo, out.hi);
    }
    if (t.kind === Kind.Nested) return readRecord(t.struct!, lt && lt.struct, depth + 1);
    return readStr(t);
  }

  /** Reads the shared k of a sequence of n elements of type t, if any (§6.1). */
  function readK(t: Type, n: number): number {
    return n === 0 || !isNumeric(t.kind) || numPlan(t).fullRaw !== 0 ? 0 : r.bits(6);
  }

  /** Reads a key of kind key (§6.1). For string keys, the bytes are left in keyBytes. */
  function readKey(key: number, k: number): Key {
    if (key === Kind.String) return decodeUTF8((keyBytes = r.bytes(lim.maxStringBytes)));
    return readElem((keyTypes[key] ??= { kind: key, quant: NO_QUANT, struct: null, elem: null, key: 0 }), null, k, 0) as number | bigint;
  }

  /** Reads a whole container of remote type t, as a container of local type lt (t when skipped). */
  function readContainer(t: Type, lt: Type | null, depth: number): ListC | MapC | BagC {
    deeper(depth);
    const ct = lt ?? t;
    const n = r.count(4, lim.maxContainerLen, 1, "length");
    countValues(n);
    if (t.kind === Kind.List) {
      const k = readK(t.elem!, n);
      const items: Elem[] = new Array(n);
      for (let i = 0; i < n; i++) items[i] = readElem(t.elem!, lt && lt.elem, k, depth);
      return new ListC(ct, items);
    }
    const bag = t.kind === Kind.Bag;
    const str = t.key === Kind.String;
    const kk = n > 0 && !str ? r.bits(6) : 0;
    const vk = bag ? 0 : readK(t.elem!, n);
    const m = new Map<Key, Elem>();
    let prev: Key | undefined;
    let prevBytes: Uint8Array | null = null;
    for (let i = 0; i < n; i++) {
      const key = readKey(t.key, kk);
      // Keys strictly ascending (§6.1): strings bytewise.
      if (i > 0 && !(str ? compareBytes(prevBytes!, keyBytes!) < 0 : prev! < key)) r.malformed("keys out of order");
      prev = key;
      prevBytes = keyBytes;
      m.set(key, bag ? readRecord(t.struct!, lt && lt.struct, depth + 1) : readElem(t.elem!, lt && lt.elem, vk, depth));
    }
    return new (bag ? BagC : MapC)(ct, m);
  }

  /**
   * Reads a standalone struct value of remote type rs into a record of
   * local type ls (rs when null): into, or a new one. A bag item of e (into,
   * under key k of e's bag at leaf bagLeaf) is written through tab's
   * transaction.
   */
  function readRecord(rs: StructType, ls: StructType | null, depth: number, into?: Rec, tab = DIRECT, e?: Entity, k?: Key, bagLeaf?: number): Rec {
    deeper(depth);
    countValues(1);
    const lst = ls ?? rs;
    const rec = into ?? new Rec(lst);
    const start = steps.length;
    readTree(rs, 0, false, depth, 2, mapping(rs, lst), lst);
    values(tab, e!, rec, start, false, depth, k, bagLeaf);
    steps.length = start;
    return rec;
  }

  /** Reads and applies the operations on one container of e (§6.2); local is −1 when it is skipped. */
  function containerOps(tab: Table, e: Entity, t: Type, lt: Type | null, local: number, slot: number): void {
    const max = lim.maxContainerLen;
    const full = (size: number): void => {
      if (size >= max) fail("limit", "container over " + max);
    };
    const c = local >= 0 ? (e.obj[slot] as ListC | MapC) : null;
    if (t.kind === Kind.List) {
      const list = c as ListC | null;
      const n = r.count(2, max, 3, "list operations");
      countValues(n);
      const k = readK(t.elem!, n);
      for (let i = 0; i < n; i++) {
        const op = r.bits(3);
        if (op > OP_PATCH || (op === OP_PATCH && t.elem!.kind !== Kind.Nested)) r.malformed("list operation " + op);
        let idx = 0;
        if (op !== OP_PUSH && op !== OP_CLEAR) {
          const u = r.u(4);
          idx = r.hi !== 0 ? max + 1 : Math.min(u, max + 1);
        }
        let v: Elem | undefined;
        if (op === OP_PATCH) {
          // A patch of struct element idx: applied to a copy, which replaces it.
          const rs = t.elem!.struct!;
          const ls = lt ? lt.elem!.struct! : rs;
          if (list && idx >= list.items.length) fail("index", `patch of ${idx} of ${list.items.length}`);
          v = readRecord(rs, ls, 2, list ? clone(list.items[idx] as Rec) : new Rec(ls));
        } else if (op <= OP_INSERT || op === OP_SET) v = readElem(t.elem!, lt && lt.elem, k, 1);
        if (!list) continue;
        if (op <= OP_INSERT) full(list.items.length);
        // Table.listOp's codes: insert, remove, set (a patch too), clear.
        tab.listOp(e, local, list, op <= OP_INSERT ? 0 : op === OP_PATCH ? 2 : op - 1, op === OP_PUSH ? list.items.length : idx, v);
      }
      return;
    }
    // Maps: removed keys, then put entries; bags: removed keys, put items, item updates.
    const bag = t.kind === Kind.Bag;
    const m = c as MapC | null;
    const ls = lt && lt.struct;
    for (let pass = 0; pass < (bag ? 3 : 2); pass++) {
      const n = r.count(2, max, 1, "keys");
      countValues(n);
      const kk = n > 0 && t.key !== Kind.String ? r.bits(6) : 0;
      const vk = pass === 1 && !bag ? readK(t.elem!, n) : 0;
      for (let i = 0; i < n; i++) {
        const key = readKey(t.key, kk);
        if (pass === 0) {
          if (m) tab.mapOp(e, local, m, key);
        } else if (pass === 1) {
          const v = bag ? readRecord(t.struct!, ls, 2) : readElem(t.elem!, lt && lt.elem, vk, 1);
          if (m) {
            full(m.m.size);
            tab.mapOp(e, local, m, key, v);
          }
        } else if (m) {
          const item = (m as BagC).m.get(key) ?? fail("no-key", "update of " + key);
          readRecord(t.struct!, ls, 2, item, tab, e, key, local);
        } else readRecord(t.struct!, null, 2);
      }
    }
  }

  /**
   * Decodes a standalone record (an RPC's arguments, §10.2) of remote
   * struct rs into a new record of local struct ls.
   */
  function decodeRecord(rs: StructType, ls: StructType, data: Uint8Array): Rec {
    if (data.length > lim.maxSegmentBytes) fail("limit", `record of ${data.length} bytes`);
    r.reset(data);
    nValues = 0;
    steps.length = 0;
    const rec = readRecord(rs, ls, 0);
    r.finish();
    return rec;
  }

  return { lim, apply, decodeRecord };
}

/** The types of map and bag keys, by kind. */
const keyTypes: Type[] = [];

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}
