/**
 * The segment decoder (docs/protocol.md §5–§8): parses segments with the
 * sender's (remote) schema and applies them, through a transaction, to
 * entities of the receiver's (local) schema.
 */

import { BitReader, MASK, MAX_K, decodeUTF8 } from "./bits.js";
import { ReplicaDecodeError } from "./errors.js";
import { Kind, checkCompatible, isNumeric, type Leaf, type Schema, type StructType, type Type } from "./schema.js";
import { BagC, Entity, ListC, MapC, Rec, bytesEqual, type Elem, type Key, type Txn, SLOT_BITS, makeId } from "./state.js";
import { decodeDelta, decodeFull, numPlan, out, toElem, type NumPlan } from "./values.js";

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
export const LIMIT_ORDER: readonly (keyof Limits)[] = [
  "maxSegmentBytes", "maxStringBytes", "maxContainerLen", "maxDepth", "maxEntities", "maxValues",
];

/** l with every zero or absent field set to its default. */
export function withDefaults(l: Partial<Limits> = {}): Limits {
  const r = { ...DEFAULT_LIMITS };
  for (const k of LIMIT_ORDER) {
    const v = l[k];
    if (v !== undefined && v > 0) r[k] = v;
  }
  return r;
}

// Section tags (§5.2).
export const SEC_END = 0;
export const SEC_CREATE = 1;
export const SEC_UPDATE = 2;
export const SEC_DESTROY = 3;
export const SEC_FILL = 4;
export const SEC_SET = 5;
/** An update naming entities by rank among those held when the tick began (§5.4). */
export const SEC_RANKED = 6;

// How a step's value is read.
const P_RAW = 1; // raw bits
const P_DELTA = 2; // U(k) delta of a non-ref number
const P_U = 3; // U(k) full value, or ref delta
const P_STR = 4;
const P_CONT = 5;

/** One leaf of a tree, with its k, resolved for reading. */
interface Step {
  leaf: number; // remote leaf
  local: number; // local leaf, or −1 to skip
  k: number;
  code: number;
  width: number; // raw bits
  plan: NumPlan | null;
  slot: number; // local numeric or object slot, or −1
  t: Type;
  // P_DELTA with a delta width D ≤ 32 (not a ref): the largest code, 32 − D, and whether S is signed.
  narrow: boolean;
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

/** Decodes segments of the remote schema into a local replica. */
export class Decoder {
  readonly lim: Limits;
  private r = new BitReader();
  private maps = new Map<StructType, Map<StructType, Mapping>>();
  private steps: Step[] = [];
  // The slots of the last ID block: ids[0, nids) (cleared by count, so that
  // the array keeps its size from group to group).
  private ids: number[] = [];
  private nids = 0;
  private gens: number[] = [];
  private entities = 0;
  private values = 0;

  constructor(
    readonly local: Schema,
    readonly remote: Schema = local,
    limits: Partial<Limits> = {},
  ) {
    this.lim = withDefaults(limits);
    checkCompatible(local, remote);
  }

  /** The class entities of remote class rc are stored as. */
  localClass(rc: StructType): StructType {
    return this.local.class(rc.classId) ?? rc;
  }

  /** Leaf mapping of remote struct rs onto local struct ls (§8). */
  mapping(rs: StructType, ls: StructType): Mapping {
    let inner = this.maps.get(rs);
    if (!inner) this.maps.set(rs, (inner = new Map()));
    let m = inner.get(ls);
    if (m) return m;
    const toLocal = new Int32Array(rs.leaves.length);
    const bands = new Uint8Array(ls.leaves.length);
    if (rs === ls) {
      for (let i = 0; i < toLocal.length; i++) {
        toLocal[i] = i;
        bands[i] = rs.leaves[i]!.band;
      }
    } else {
      const byPath = new Map<string, number>();
      for (const l of ls.leaves) byPath.set(l.path.join("."), l.index);
      for (const l of rs.leaves) {
        const j = byPath.get(l.path.join(".")) ?? -1;
        toLocal[l.index] = j;
        if (j >= 0) bands[j] = l.band;
      }
    }
    m = { toLocal, bands };
    inner.set(ls, m);
    return m;
  }

  /** Bands of the local class of remote class rc, as the sender defines them. */
  bandsOf(rc: StructType): Uint8Array {
    return rc.nbands === 0 ? ZERO_BANDS : this.mapping(rc, this.localClass(rc)).bands;
  }

  /**
   * Decodes one segment into txn. On error (a ReplicaDecodeError) the
   * transaction holds a partial tick: the caller rolls it back.
   */
  apply(txn: Txn, seg: Uint8Array): void {
    if (seg.length > this.lim.maxSegmentBytes) {
      throw new ReplicaDecodeError("limit", `segment of ${seg.length} bytes > ${this.lim.maxSegmentBytes}`, 0);
    }
    const r = this.r;
    r.reset(seg);
    this.entities = 0;
    this.values = 0;
    try {
      this.sections(txn);
    } catch (e) {
      if (e instanceof ReplicaDecodeError && e.bit < 0) e.bit = r.pos;
      // A maxDepth set beyond what the JS stack holds: still a typed rejection.
      if (e instanceof RangeError) throw new ReplicaDecodeError("limit", `nesting deeper than the stack allows (${e.message})`, r.pos);
      throw e;
    }
  }

  private sections(txn: Txn): void {
    const r = this.r;
    for (;;) {
      const tag = r.bits(3);
      switch (tag) {
        case SEC_END:
          r.finish("segment");
          return;
        case SEC_DESTROY:
          this.readIDs();
          for (let i = 0; i < this.nids; i++) txn.destroySlot(this.ids[i]!);
          break;
        case SEC_CREATE:
        case SEC_UPDATE:
        case SEC_FILL:
        case SEC_SET:
        case SEC_RANKED: {
          const cid = r.u(4);
          const rc = r.hi === 0 ? this.remote.class(cid) : undefined;
          if (!rc) throw new ReplicaDecodeError("unknown", `class ${r.hi === 0 ? cid : "≥ 2^32"}`);
          const groups = r.count(0, this.lim.maxEntities, 8, "groups");
          for (let g = 0; g < groups; g++) this.group(txn, tag, rc);
          break;
        }
        default:
          r.malformed(`section tag ${tag}`);
      }
    }
  }

  private readIDs(): void {
    const r = this.r;
    const n = r.count(3, this.lim.maxEntities - this.entities, 1, "entities");
    this.entities += n;
    const k = r.bits(6);
    const ids = this.ids;
    this.nids = 0;
    let prev = -1;
    for (let i = 0; i < n; i++) {
      const gap = r.u(k);
      if (r.hi !== 0) r.malformed(`entity slot gap out of range`);
      const slot = prev + 1 + gap;
      if (slot >= 1 << SLOT_BITS) r.malformed(`entity slot ${slot} out of range`);
      if (i < ids.length) ids[i] = slot;
      else ids.push(slot);
      prev = slot;
    }
    this.nids = n;
  }

  /** Turns the ranks readIDs read into the slots they name (§5.4). */
  private rankedIDs(txn: Txn): void {
    const ids = this.ids;
    for (let i = 0; i < this.nids; i++) {
      const slot = txn.heldSlot(ids[i]!);
      if (slot < 0) throw new ReplicaDecodeError("rank", `entity rank ${ids[i]}, of ${txn.heldLen()} entities held`);
      ids[i] = slot;
    }
  }

  private readGens(): void {
    const r = this.r;
    const k = r.bits(6);
    const gens = this.gens;
    gens.length = 0;
    for (let i = 0; i < this.nids; i++) {
      const g = r.u(k);
      if (r.hi !== 0 || g > 255) r.malformed(`generation ${g} out of range`);
      gens.push(g);
    }
  }

  private group(txn: Txn, tag: number, rc: StructType): void {
    const lc = this.localClass(rc);
    const map = this.mapping(rc, lc);
    const delta = tag === SEC_UPDATE || tag === SEC_RANKED;
    this.steps.length = 0;
    this.readTree(rc, 0, delta, 0, tag === SEC_RANKED ? 0 : 2);
    const steps = this.steps;
    this.planSteps(lc, map, delta);
    this.readIDs();
    if (tag === SEC_RANKED) this.rankedIDs(txn);
    if (tag === SEC_CREATE) this.readGens();
    const ids = this.ids;
    const bands = rc.nbands === 0 ? ZERO_BANDS : map.bands;
    for (let i = 0; i < this.nids; i++) {
      const slot = ids[i]!;
      let e: Entity | undefined;
      if (tag === SEC_CREATE) {
        e = txn.create(lc, makeId(slot, this.gens[i]!), rc.classId, bands, rc.nbands);
      } else {
        e = txn.atSlot(slot);
        if (!e) throw new ReplicaDecodeError("not-found", `${SEC_NAMES[tag]} of empty slot ${slot}`);
        if (tag === SEC_FILL && !txn.isFillable(slot)) {
          throw new ReplicaDecodeError("not-found", `fill for slot ${slot}, neither created nor reset in this tick`);
        }
      }
      if (e.classId !== rc.classId) {
        throw new ReplicaDecodeError("malformed", `slot ${slot} holds a ${e.type.name}, not a ${rc.name}`);
      }
      this.entityValues(txn, e, steps, delta);
    }
  }

  /** Resolves each step of a group of remote class rc stored as local class lc. */
  private planSteps(lc: StructType, map: Mapping, delta: boolean): void {
    for (const s of this.steps) {
      s.local = map.toLocal[s.leaf]!;
      const t = s.t;
      s.slot = -1;
      if (isNumeric(t.kind)) {
        const p = numPlan(t);
        s.plan = p;
        if (s.local >= 0) s.slot = lc.leaves[s.local]!.num;
        const raw = delta ? p.deltaRaw : p.fullRaw;
        if (raw !== 0) {
          s.code = P_RAW;
          s.width = raw;
        } else if (delta && t.kind !== Kind.Ref) {
          s.code = P_DELTA;
          s.narrow = p.D <= 32;
          s.mask = MASK[Math.min(p.D, 32)]!;
          s.sh = 32 - Math.min(p.D, 32);
          s.signed = p.signed;
        } else s.code = P_U;
      } else if (t.kind === Kind.String || t.kind === Kind.Bytes) {
        s.code = P_STR;
        if (s.local >= 0) s.slot = lc.leaves[s.local]!.obj;
      } else {
        s.code = P_CONT;
        if (s.local >= 0) s.slot = lc.leaves[s.local]!.obj;
      }
    }
  }

  /**
   * Reads a field tree of remote struct st into this.steps (§5.5). base is
   * the remote leaf index of st's first leaf.
   */
  /** Field-ID gaps are U(gapK) codes: U(2), but U(0) in ranked update sections (§5.5). */
  private readTree(st: StructType, base: number, delta: boolean, depth: number, gapK = 2): void {
    if (depth >= this.lim.maxDepth) throw new ReplicaDecodeError("limit", `nesting deeper than ${this.lim.maxDepth}`);
    const r = this.r;
    const n = r.count(2, st.fields.length, 2, "fields");
    let prev = 0;
    for (let i = 0; i < n; i++) {
      const id = prev + 1 + r.u(gapK) + r.hi * 4294967296;
      if (id > 0xffffffff) r.malformed("field ID out of range");
      prev = id;
      const f = st.field(id);
      if (!f || f.deprecated) throw new ReplicaDecodeError("unknown", `field ${id} of ${st.name}`);
      const t = f.type;
      if (t.kind === Kind.Nested) {
        this.readTree(t.struct!, base + f.leaf, delta, depth + 1, gapK);
        continue;
      }
      let k = 0;
      if (isNumeric(t.kind)) {
        const p = numPlan(t);
        if ((delta ? p.deltaRaw : p.fullRaw) === 0) k = r.bits(6);
      }
      this.steps.push({ leaf: base + f.leaf, local: -1, k, code: 0, width: 0, plan: null, slot: -1, t, narrow: false, mask: 0, sh: 0, signed: false });
    }
  }

  private readNum(p: NumPlan, k: number, delta: boolean, olo: number, ohi: number): void {
    const r = this.r;
    const raw = delta ? p.deltaRaw : p.fullRaw;
    if (raw !== 0) {
      out.lo = r.bitsWide(raw);
      out.hi = r.hi;
      return;
    }
    const lo = r.u(k);
    const ok = delta ? decodeDelta(p, olo, ohi, lo, r.hi) : decodeFull(p, lo, r.hi);
    if (!ok) r.malformed(`value out of range for ${KIND_NAME(p.kind)}`);
  }

  private entityValues(txn: Txn, e: Entity, steps: Step[], delta: boolean): void {
    const r = this.r;
    for (let i = 0; i < steps.length; i++) {
      const s = steps[i]!;
      switch (s.code) {
        case P_DELTA: {
          const lo = r.u(s.k);
          const hi = r.hi;
          const slot = s.slot;
          if (s.narrow) {
            // D ≤ 32: plain number arithmetic (§4.3).
            if (hi !== 0 || lo > s.mask) r.malformed("delta out of range");
            if (slot < 0) break;
            let v = e.num[slot << 1]! + ((lo >>> 1) ^ -(lo & 1));
            if (s.signed) {
              v = (v << s.sh) >> s.sh;
              txn.setNum(e, s.local, slot, v >>> 0, v < 0 ? 0xffffffff : 0);
            } else {
              txn.setNum(e, s.local, slot, s.sh === 0 ? v >>> 0 : v & s.mask, 0);
            }
            break;
          }
          if (slot >= 0) {
            const a = e.num;
            if (!decodeDelta(s.plan!, a[slot << 1]!, a[(slot << 1) + 1]!, lo, hi)) r.malformed("delta out of range");
            txn.setNum(e, s.local, slot, out.lo, out.hi);
          } else if (!decodeDelta(s.plan!, 0, 0, lo, hi)) r.malformed("delta out of range");
          break;
        }
        case P_RAW: {
          const lo = r.bitsWide(s.width);
          if (s.slot >= 0) txn.setNum(e, s.local, s.slot, lo, r.hi);
          break;
        }
        case P_U: {
          let olo = 0;
          let ohi = 0;
          if (delta && s.slot >= 0) {
            olo = e.num[s.slot << 1]!;
            ohi = e.num[(s.slot << 1) + 1]!;
          }
          this.readNum(s.plan!, s.k, delta, olo, ohi);
          if (s.slot >= 0) txn.setNum(e, s.local, s.slot, out.lo, out.hi);
          break;
        }
        case P_STR: {
          const v = this.readStr(s.t.kind);
          if (s.local >= 0) txn.setObj(e, s.local, s.slot, v);
          break;
        }
        default: {
          const lt = s.local >= 0 ? e.type.leaves[s.local]!.field.type : null;
          if (!delta || r.bool()) {
            const c = this.readContainer(s.t, lt, 1);
            if (lt) txn.replaceContainer(e, s.local, s.slot, c);
          } else {
            this.containerOps(txn, e, s.t, lt, s.local, s.slot);
          }
        }
      }
    }
  }

  private readStr(kind: number): string | Uint8Array {
    return kind === Kind.Bytes ? this.r.bytes(this.lim.maxStringBytes) : this.r.string(this.lim.maxStringBytes);
  }

  private countValues(n: number): void {
    this.values += n;
    if (this.values > this.lim.maxValues) {
      throw new ReplicaDecodeError("limit", `more than ${this.lim.maxValues} values in one segment`);
    }
  }

  /** Reads one element of remote type t; lt is the local element type, or null when skipped. */
  private readElem(t: Type, lt: Type | null, k: number, depth: number): Elem {
    if (isNumeric(t.kind)) {
      const p = numPlan(t);
      this.readNum(p, k, false, 0, 0);
      return toElem(p, out.lo, out.hi);
    }
    if (t.kind === Kind.Nested) return this.readRecord(t.struct!, lt ? lt.struct! : null, depth + 1);
    return this.readStr(t.kind);
  }

  /** Reads the shared k of a sequence of n elements of type t, if any (§6.1). */
  private readK(t: Type, n: number): number {
    if (n === 0 || !isNumeric(t.kind) || numPlan(t).fullRaw !== 0) return 0;
    return this.r.bits(6);
  }

  private prevKeyBytes: Uint8Array | null = null;

  /** Reads a key of kind key (§6.1). For string keys, the bytes are left in prevKeyBytes. */
  private readKey(key: number, k: number): Key {
    const r = this.r;
    if (key === Kind.String) {
      const b = r.bytes(this.lim.maxStringBytes);
      this.prevKeyBytes = b;
      return decodeUTF8(b);
    }
    const p = numPlan(keyType(key));
    const lo = r.u(k);
    if (!decodeFull(p, lo, r.hi)) r.malformed(`key out of range for ${KIND_NAME(key)}`);
    return toElem(p, out.lo, out.hi) as number | bigint;
  }

  /** Reads a key and checks it sorts after prev (whole maps and bags, §6.1). */
  private readOrderedKey(key: number, k: number, prev: Key | undefined, prevBytes: Uint8Array | null): Key {
    const v = this.readKey(key, k);
    if (prev !== undefined) {
      const ok = key === Kind.String ? compareBytes(prevBytes!, this.prevKeyBytes!) < 0 : prev < v;
      if (!ok) this.r.malformed("keys not in ascending order");
    }
    return v;
  }

  /** Reads a whole container of remote type t, as a container of local type lt (t when skipped). */
  private readContainer(t: Type, lt: Type | null, depth: number): ListC | MapC | BagC {
    if (depth >= this.lim.maxDepth) throw new ReplicaDecodeError("limit", `nesting deeper than ${this.lim.maxDepth}`);
    const ct = lt ?? t;
    const r = this.r;
    const n = r.count(4, this.lim.maxContainerLen, 1, "container length");
    this.countValues(n);
    switch (t.kind) {
      case Kind.List: {
        const k = this.readK(t.elem!, n);
        const items: Elem[] = new Array(n);
        for (let i = 0; i < n; i++) items[i] = this.readElem(t.elem!, lt ? lt.elem! : null, k, depth);
        return new ListC(ct, items);
      }
      case Kind.Map: {
        const kk = t.key !== Kind.String && n > 0 ? r.bits(6) : 0;
        const vk = this.readK(t.elem!, n);
        const m = new Map<Key, Elem>();
        let prev: Key | undefined;
        let prevBytes: Uint8Array | null = null;
        for (let i = 0; i < n; i++) {
          const key = this.readOrderedKey(t.key, kk, prev, prevBytes);
          prev = key;
          prevBytes = this.prevKeyBytes;
          m.set(key, this.readElem(t.elem!, lt ? lt.elem! : null, vk, depth));
        }
        return new MapC(ct, m);
      }
      default: {
        const kk = n > 0 ? r.bits(6) : 0;
        const m = new Map<Key, Rec>();
        let prev: Key | undefined;
        for (let i = 0; i < n; i++) {
          const key = this.readOrderedKey(t.key, kk, prev, null);
          prev = key;
          m.set(key, this.readRecord(t.struct!, lt ? lt.struct! : null, depth + 1));
        }
        return new BagC(ct, m);
      }
    }
  }

  /** Reads a standalone struct value of remote type rs into a new record of local type ls (rs when null). */
  readRecord(rs: StructType, ls: StructType | null, depth: number, into?: Rec, item?: ItemTarget): Rec {
    if (depth >= this.lim.maxDepth) throw new ReplicaDecodeError("limit", `nesting deeper than ${this.lim.maxDepth}`);
    this.countValues(1);
    const lst = ls ?? rs;
    const rec = into ?? (item ? item.rec : new Rec(lst));
    const map = this.mapping(rs, lst);
    const start = this.steps.length;
    this.readTree(rs, 0, false, depth);
    const end = this.steps.length;
    const r = this.r;
    for (let i = start; i < end; i++) {
      const s = this.steps[i]!;
      const t = s.t;
      const local = map.toLocal[s.leaf]!;
      const ll: Leaf | undefined = local >= 0 ? lst.leaves[local] : undefined;
      if (isNumeric(t.kind)) {
        this.readNum(numPlan(t), s.k, false, 0, 0);
        if (!ll) continue;
        if (item) item.txn.setItemNum(item.e, item.leaf, item.key, rec, local, ll.num, out.lo, out.hi);
        else {
          rec.num[ll.num << 1] = out.lo;
          rec.num[(ll.num << 1) + 1] = out.hi;
        }
      } else if (t.kind === Kind.String || t.kind === Kind.Bytes) {
        const v = this.readStr(t.kind);
        if (!ll) continue;
        if (item) item.txn.setItemObj(item.e, item.leaf, item.key, rec, local, ll.obj, v);
        else rec.obj[ll.obj] = v;
      } else {
        const c = this.readContainer(t, ll ? ll.field.type : null, depth + 1);
        if (!ll) continue;
        if (item) item.txn.setItemObj(item.e, item.leaf, item.key, rec, local, ll.obj, c);
        else rec.obj[ll.obj] = c;
      }
    }
    void r;
    this.steps.length = start;
    return rec;
  }

  /** Reads and applies the operations on one container of e (§6.2); local is −1 when it is skipped. */
  private containerOps(txn: Txn, e: Entity, t: Type, lt: Type | null, local: number, slot: number): void {
    const r = this.r;
    const lim = this.lim;
    switch (t.kind) {
      case Kind.List: {
        const n = r.count(2, lim.maxContainerLen, 3, "list operations");
        this.countValues(n);
        const k = this.readK(t.elem!, n);
        const list = local >= 0 ? (e.obj[slot] as ListC) : null;
        for (let i = 0; i < n; i++) {
          let op = r.bits(3);
          if (op > OP_PATCH || (op === OP_PATCH && t.elem!.kind !== Kind.Nested)) r.malformed(`list operation ${op}`);
          let idx = 0;
          if (op !== OP_PUSH && op !== OP_CLEAR) {
            const u = r.u(4);
            idx = r.hi !== 0 ? lim.maxContainerLen + 1 : Math.min(u, lim.maxContainerLen + 1);
          }
          let v: Elem | undefined;
          if (op === OP_PATCH) {
            v = this.readPatch(t.elem!, lt ? lt.elem! : null, list, idx);
            op = OP_SET;
          } else if (op === OP_PUSH || op === OP_INSERT || op === OP_SET) {
            v = this.readElem(t.elem!, lt ? lt.elem! : null, k, 1);
          }
          if (!list) continue;
          switch (op) {
            case OP_PUSH:
              if (list.items.length >= lim.maxContainerLen) throw new ReplicaDecodeError("limit", `list longer than ${lim.maxContainerLen}`);
              txn.listInsert(e, local, list, list.items.length, v!);
              break;
            case OP_INSERT:
              if (list.items.length >= lim.maxContainerLen) throw new ReplicaDecodeError("limit", `list longer than ${lim.maxContainerLen}`);
              txn.listInsert(e, local, list, idx, v!);
              break;
            case OP_REMOVE:
              txn.listRemove(e, local, list, idx);
              break;
            case OP_SET:
              txn.listSet(e, local, list, idx, v!);
              break;
            case OP_CLEAR:
              txn.listClear(e, local, list);
              break;
          }
        }
        return;
      }
      case Kind.Map: {
        const m = local >= 0 ? (e.obj[slot] as MapC) : null;
        for (let pass = 0; pass < 2; pass++) {
          const n = r.count(2, lim.maxContainerLen, 1, "map keys");
          this.countValues(n);
          const kk = t.key !== Kind.String && n > 0 ? r.bits(6) : 0;
          const vk = pass === 1 ? this.readK(t.elem!, n) : 0;
          for (let i = 0; i < n; i++) {
            const key = this.readKey(t.key, kk);
            if (pass === 0) {
              if (m) txn.mapDelete(e, local, m, key);
              continue;
            }
            const v = this.readElem(t.elem!, lt ? lt.elem! : null, vk, 1);
            if (m) {
              if (m.m.size >= lim.maxContainerLen) throw new ReplicaDecodeError("limit", `map larger than ${lim.maxContainerLen}`);
              txn.mapPut(e, local, m, key, v);
            }
          }
        }
        return;
      }
      default: {
        const b = local >= 0 ? (e.obj[slot] as BagC) : null;
        const ls = lt ? lt.struct! : null;
        for (let pass = 0; pass < 3; pass++) {
          const n = r.count(2, lim.maxContainerLen, 1, "bag keys");
          this.countValues(n);
          const kk = n > 0 ? r.bits(6) : 0;
          for (let i = 0; i < n; i++) {
            const key = this.readKey(t.key, kk);
            if (pass === 0) {
              if (b) txn.bagRemove(e, local, b, key);
            } else if (pass === 1) {
              const rec = this.readRecord(t.struct!, ls, 2);
              if (b) {
                if (b.m.size >= lim.maxContainerLen) throw new ReplicaDecodeError("limit", `bag larger than ${lim.maxContainerLen}`);
                txn.bagPut(e, local, b, key, rec);
              }
            } else if (b) {
              const item = b.m.get(key);
              if (!item) throw new ReplicaDecodeError("no-key", `update of absent bag item ${key}`);
              this.readRecord(t.struct!, ls, 2, undefined, { txn, e, leaf: local, key, rec: item });
            } else {
              this.readRecord(t.struct!, null, 2);
            }
          }
        }
      }
    }
  }

  /** Reads a patch of struct element idx of list (null: skipped) and returns the patched copy. */
  private readPatch(t: Type, lt: Type | null, list: ListC | null, idx: number): Rec {
    const ls = lt ? lt.struct! : t.struct!;
    let rec: Rec;
    if (list) {
      if (idx >= list.items.length) {
        throw new ReplicaDecodeError("index", `patch of element ${idx} of a list of ${list.items.length}`);
      }
      rec = (list.items[idx] as Rec).clone();
    } else rec = new Rec(ls);
    return this.readRecord(t.struct!, ls, 2, rec);
  }

  /**
   * Decodes a standalone record (an RPC's arguments, §10.2) of remote
   * struct rs into a new record of local struct ls.
   */
  decodeRecord(rs: StructType, ls: StructType, data: Uint8Array): Rec {
    if (data.length > this.lim.maxSegmentBytes) throw new ReplicaDecodeError("limit", `record of ${data.length} bytes`);
    this.r.reset(data);
    this.entities = 0;
    this.values = 0;
    this.steps.length = 0;
    const rec = this.readRecord(rs, ls, 0);
    this.r.finish("record");
    return rec;
  }
}

interface ItemTarget {
  txn: Txn;
  e: Entity;
  leaf: number;
  key: Key;
  rec: Rec;
}

// List operation codes (§6.2).
const OP_PUSH = 0;
const OP_INSERT = 1;
const OP_REMOVE = 2;
const OP_SET = 3;
const OP_CLEAR = 4;
const OP_PATCH = 5;

const SEC_NAMES = ["end", "create", "update", "destroy", "fill", "set", "update"];

const KIND_NAME = (k: number): string => ["invalid", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"][k] ?? `kind ${k}`;

const keyTypes = new Map<number, Type>();
function keyType(k: number): Type {
  let t = keyTypes.get(k);
  if (!t) keyTypes.set(k, (t = { kind: k, quant: { mode: 0, step: 0, min: 0, nbits: 0 }, struct: null, elem: null, key: 0 }));
  return t;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

export { bytesEqual, MAX_K };
