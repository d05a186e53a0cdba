/**
 * The schema model: kinds, types, structs and classes, their flattened leaf
 * layout (docs/protocol.md §5.5), and compatibility between two versions
 * of a schema (§8). Schemas come from descriptors (./descriptor.ts), which
 * check everything a type says on its own; laying a schema out checks the
 * rest of §3.5 (how structs use each other).
 */

import { fail } from "./errors.js";
import { Kind as K, Vis as V } from "./enums.js";

/** An object of the enum E's names, given space-separated in order, each mapped to its number (from 0). */
export const named = <E>(names: string): { readonly [N in keyof E]: E[N] } => Object.fromEntries(names.split(" ").map((n, i) => [n, i])) as never;

/** Value kinds (§3.2), by name; the numbers are part of the format. */
export const Kind = named<typeof K>("Invalid Bool Int8 Int16 Int32 Int64 Uint8 Uint16 Uint32 Uint64 Float32 Float64 String Bytes Ref Nested List Map Bag");
export type Kind = K;

/** Visibility bits (§3.4), by name. */
export const Vis = named<typeof V>("Server Owner Others All");
export type Vis = V;

export const isNumeric = (k: number): boolean => (k >= K.Bool && k <= K.Float64) || k === K.Ref;
export const isSigned = (k: number): boolean => k >= K.Int8 && k <= K.Int64;
export const isContainer = (k: number): boolean => k >= K.List;

/** Bit width W of a numeric kind (§3.2); ref is 32. */
export const kindWidth = (k: number): number => [0, 1, 8, 16, 32, 64, 8, 16, 32, 64, 32, 64, 0, 0, 32][k] ?? 0;

/** Quantization of a float field (§3.3, §4.2). mode 0: none; 1: unbounded; 2: bounded. */
export interface Quant {
  mode: 0 | 1 | 2;
  step: number;
  min: number;
  nbits: number;
}

export const NO_QUANT: Quant = Object.freeze({ mode: 0, step: 0, min: 0, nbits: 0 }) as Quant;

/** A value type. */
export interface Type {
  kind: number;
  quant: Quant; // floats
  struct: StructType | null; // nested, and a bag's item type
  elem: Type | null; // list, map
  key: number; // map, bag: key kind
}

/** A new type of kind k alone: no quantization, struct, element or key kind. */
export const kindType = (kind: number): Type => ({ kind, quant: NO_QUANT, struct: null, elem: null, key: 0 });

/** One declared field of a struct. */
export interface Field {
  id: number;
  name: string;
  type: Type;
  vis: number;
  life: number;
  chan: number;
  deprecated: boolean;
  /** Level-of-detail band (§3.6), 0 = none. */
  band: number;
  /** @internal First leaf of the field in its struct's flattened layout (set by layout). */
  leaf: number;
  /** @internal The name's bytes as the descriptor carried them. */
  nameBytes?: Uint8Array;
}

/** A remote procedure call declared on a class. */
export interface Rpc {
  id: number;
  name: string;
  /** 0: client→server, 1: server→client. */
  dir: number;
  args: StructType;
  /** @internal */
  nameBytes?: Uint8Array;
}

/** One leaf of a struct's flattened layout (§5.5). */
export interface Leaf {
  index: number;
  field: Field;
  /** @internal The field's type, field.type. */
  ty: Type;
  /** @internal Field IDs from the struct down to the leaf, joined by commas. */
  path: string;
  /** Dotted field names from the struct down to the leaf. */
  name: string;
  /** Effective visibility: the visibilities on the path intersected. */
  vis: number;
  /** Band of the leaf's top-level field (entity classes only). */
  band: number;
  /** @internal Numeric slot (values at 2·num, 2·num+1 of a record's num array), or −1. */
  num: number;
  /** @internal Object slot (string, bytes or container), or −1. */
  obj: number;
}

/** An entity class or a struct type. */
export class StructType {
  declare name: string;
  isClass = false;
  classId = 0;
  /** Level-of-detail band distances (§3.6), band 1 first. */
  distances: number[] = [];
  fields: Field[] = [];
  rpcs: Rpc[] = [];
  leaves: Leaf[] = [];
  /** @internal Numeric slots of a record of the struct. */
  numSlots = 0;
  /** @internal Object slots of a record of the struct. */
  objSlots = 0;
  /** @internal The types of the object slots, in order. */
  objTypes: Type[] = [];
  /** @internal The name's bytes as the descriptor carried them. */
  nameBytes?: Uint8Array;
  /** @internal Fields by ID. */
  byId = new Map<number, Field>();
  /** @internal 0: not laid out, 1: being laid out, 2: laid out. */
  state = 0;
  /** @internal Leaves once nested structs are flattened, deprecated fields included. */
  all = 0;

  constructor(name: string) {
    this.name = name;
  }

  get nbands(): number {
    return this.distances.length;
  }

  field(id: number): Field | undefined {
    return this.byId.get(id);
  }

  rpc(id: number): Rpc | undefined {
    return this.rpcs.find((r) => r.id === id);
  }

  /** The leaf with the given dotted name ("pos.x"), or undefined. */
  leafNamed(name: string): Leaf | undefined {
    return this.leaves.find((l) => l.name === name);
  }
}

/**
 * The structs reached from classes in depth-first pre-order, each once:
 * a struct, then the structs of its fields' types, then its RPCs'
 * arguments. From the classes in ascending class ID, this is the canonical
 * order of a descriptor's structs (§3.1).
 */
export const reach = (classes: StructType[]): Set<StructType> => {
  const order = new Set<StructType>();
  const visit = (st: StructType | null): void => {
    if (!st || order.has(st)) return;
    order.add(st);
    for (const f of st.fields) for (let t: Type | null = f.type; t; t = t.elem) visit(t.struct);
    for (const r of st.rpcs) visit(r.args);
  };
  classes.forEach(visit);
  return order;
};

/** Throws a "descriptor" error (here, and for the descriptor decoder). */
export const bad = (msg: string): never => fail("descriptor", msg);

// Leaves laid out by the schema being built, deprecated fields included: a
// few hundred bytes of descriptor can name billions of flattened fields, so
// layout stops at 2^20 (schema/descriptor.go), and each class at 2^16 (§3.5).
let budget = 0;

/** Lays out struct s; the structs it holds by reference (elements, items, arguments) go to pending. */
const layout = (s: StructType, pending: StructType[]): void => {
  if (s.state === 1) bad(s.name + " contains itself");
  if (s.state) return;
  s.state = 1;
  s.fields.sort((a, b) => a.id - b.id);
  for (const f of s.fields) {
    s.byId.set(f.id, f);
    const t = f.type;
    const st = t.struct;
    const e = t.elem?.struct;
    if (st?.isClass || e?.isClass) bad(f.name + " nests a class");
    // Structs held by reference are laid out on their own: a list may hold its own struct.
    if (t.kind === K.Bag) pending.push(st!);
    if (e) pending.push(e);
    f.leaf = s.leaves.length;
    const numeric = isNumeric(t.kind);
    // What the field adds: a nested struct's leaves and slots, or one leaf of its own.
    const sub =
      t.kind === K.Nested
        ? (layout(st!, pending), st!)
        : { leaves: [{ field: f, ty: t, path: "", name: "", vis: 3, num: numeric ? 0 : -1, obj: numeric ? -1 : 0 }], numSlots: +numeric, objSlots: +!numeric, objTypes: numeric ? [] : [t], all: 1 };
    s.all += sub.all;
    if ((budget += sub.all) > 1 << 20) bad("too many fields");
    if (f.deprecated) continue;
    for (const l of sub.leaves) {
      s.leaves.push({
        ...l,
        index: s.leaves.length,
        path: f.id + (l.path && "," + l.path),
        name: f.name + (l.name && "." + l.name),
        vis: l.vis & f.vis,
        band: f.band,
        num: l.num < 0 ? -1 : l.num + s.numSlots,
        obj: l.obj < 0 ? -1 : l.obj + s.objSlots,
      });
    }
    if (s.leaves.length > 1 << 16) bad(s.name + ": too many fields");
    s.objTypes.push(...sub.objTypes);
    s.numSlots += sub.numSlots;
    s.objSlots += sub.objSlots;
  }
  for (const r of s.rpcs) {
    if (!s.isClass || r.args.isClass) bad(`RPC ${r.name} of ${s.name}`);
    pending.push(r.args);
  }
  s.state = 2;
};

/** A set of entity classes, laid out. */
export class Schema {
  declare readonly classes: StructType[];
  /** @internal The descriptor this schema was decoded from, if it was (./descriptor.ts). */
  declare descriptor?: Uint8Array;

  /**
   * Lays out the classes and everything they reach; throws a "descriptor"
   * error if they do not lay out. (The checks of a type on its own are the
   * descriptor decoder's.)
   */
  constructor(classes: StructType[]) {
    this.classes = [...classes].sort((a, b) => a.classId - b.classId);
    budget = 0;
    this.classes.forEach((c, i) => {
      if (!c.isClass || c.classId === this.classes[i - 1]?.classId) bad("class ID " + c.classId + " twice");
      for (const pending = [c]; pending.length > 0; ) layout(pending.pop()!, pending);
    });
  }

  /** The class with the given class ID, or undefined. */
  class(id: number): StructType | undefined {
    return this.lookup(id);
  }

  /** The class with the given name, or undefined. */
  classNamed(name: string): StructType | undefined {
    return this.lookup(name);
  }

  /** @internal The class c is, or names (by name or class ID), of this schema; or undefined. */
  lookup(c: StructType | string | number): StructType | undefined {
    return this.classes.find((x) => x === c || x.name === c || x.classId === c);
  }
}

/**
 * Checks that data encoded with schema remote can be decoded into schema
 * local (§8): every field both have, matched by class ID and field ID path,
 * has the same type. Throws a ReplicaDecodeError with code "incompatible".
 */
export const checkCompatible = (local: Schema, remote: Schema): void => {
  // Each pair of structs is checked once: the remote structs checked against each local one.
  const seen = new Map<StructType, Set<StructType>>();
  // A type's kind, key kind and quantization, which two versions must share.
  const sig = ({ kind, key, quant: q }: Type): unknown[] => [kind, key, q.mode, q.step, q.min, q.nbits];
  const type = (l: Type | null, r: Type | null, where: string): void => {
    if (!l || !r) return;
    const b = sig(r);
    if (sig(l).some((x, i) => !Object.is(x, b[i]))) fail("incompatible", where);
    struct(l.struct, r.struct, where);
    type(l.elem, r.elem, where);
  };
  const struct = (l: StructType | null | undefined, r: StructType | null, where: string): void => {
    if (!l || !r) return;
    const done = seen.get(l) ?? new Set();
    if (done.has(r)) return;
    seen.set(l, done.add(r));
    for (const rr of r.rpcs) {
      const lr = l.rpc(rr.id);
      if (lr && lr.dir !== rr.dir) fail("incompatible", where + " RPC " + lr.name);
      if (lr) struct(lr.args, rr.args, where + " RPC " + lr.name);
    }
    for (const rf of r.fields) {
      const lf = l.field(rf.id);
      if (lf && !lf.deprecated && !rf.deprecated) type(lf.type, rf.type, where + "." + lf.name);
    }
  };
  if (local !== remote) for (const rc of remote.classes) struct(local.class(rc.classId), rc, rc.name);
};
