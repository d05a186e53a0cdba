/**
 * The schema model: kinds, types, structs and classes, their flattened leaf
 * layout (docs/protocol.md §5.5), and compatibility between two versions
 * of a schema (§8). Schemas come from descriptors (./descriptor.ts).
 */

import { ReplicaDecodeError } from "./errors.js";
import { Kind as K, Vis as V } from "./enums.js";

/** Value kinds (§3.2), by name; the numbers are part of the format. */
export const Kind = {
  Invalid: K.Invalid,
  Bool: K.Bool,
  Int8: K.Int8,
  Int16: K.Int16,
  Int32: K.Int32,
  Int64: K.Int64,
  Uint8: K.Uint8,
  Uint16: K.Uint16,
  Uint32: K.Uint32,
  Uint64: K.Uint64,
  Float32: K.Float32,
  Float64: K.Float64,
  String: K.String,
  Bytes: K.Bytes,
  Ref: K.Ref,
  Nested: K.Nested,
  List: K.List,
  Map: K.Map,
  Bag: K.Bag,
} as const satisfies { readonly [N in keyof typeof K]: K };
export type Kind = K;

/** Visibility bits (§3.4), by name. */
export const Vis = {
  Server: V.Server,
  Owner: V.Owner,
  Others: V.Others,
  All: V.All,
} as const satisfies { readonly [N in keyof typeof V]: V };
export type Vis = V;

export type KindValue = K;

/** Number of kinds: a kind ≥ this is invalid. */
export const NUM_KINDS = 19;

/** The kinds' names as §3.2 spells them: "invalid", "bool", "int8", … */
export const KIND_NAMES: readonly string[] = "invalid bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 string bytes ref nested list map bag".split(" ");

export const isNumeric = (k: number): boolean => (k >= K.Bool && k <= K.Float64) || k === K.Ref;
export const isSigned = (k: number): boolean => k >= K.Int8 && k <= K.Int64;
export const isContainer = (k: number): boolean => k >= K.List && k <= K.Bag;
export const isFloat = (k: number): boolean => k === K.Float32 || k === K.Float64;
/** Whether k may key a map (integers and strings). */
export const validMapKey = (k: number): boolean => (k >= K.Int8 && k <= K.Uint64) || k === K.String;

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
  /** First leaf of the field in its struct's flattened layout (set by layout). */
  leaf: number;
  /** The name's bytes as the descriptor carried them. */
  nameBytes?: Uint8Array;
}

/** A remote procedure call declared on a class. */
export interface Rpc {
  id: number;
  name: string;
  /** 0: client→server, 1: server→client. */
  dir: number;
  args: StructType;
  nameBytes?: Uint8Array;
}

/** One leaf of a struct's flattened layout (§5.5). */
export interface Leaf {
  index: number;
  field: Field;
  /** Field IDs from the struct down to the leaf. */
  path: number[];
  /** Dotted field names from the struct down to the leaf. */
  name: string;
  /** Effective visibility: the visibilities on the path intersected. */
  vis: number;
  /** Band of the leaf's top-level field (entity classes only). */
  band: number;
  /** Numeric slot (values at 2·num, 2·num+1 of a record's num array), or −1. */
  num: number;
  /** Object slot (string, bytes or container), or −1. */
  obj: number;
}

/** MaxLeaves bounds the leaves a struct flattens to (§3.5). */
export const MAX_LEAVES = 1 << 16;

/** An entity class or a struct type. */
export class StructType {
  isClass = false;
  classId = 0;
  /** Level-of-detail band distances (§3.6), band 1 first. */
  distances: number[] = [];
  fields: Field[] = [];
  rpcs: Rpc[] = [];
  byId = new Map<number, Field>();
  rpcById = new Map<number, Rpc>();
  leaves: Leaf[] = [];
  numSlots = 0;
  objSlots = 0;
  /** The name's bytes as the descriptor carried them. */
  nameBytes?: Uint8Array;
  /** @internal 0: not laid out, 1: being laid out, 2: laid out. */
  state = 0;

  constructor(public name: string) {}

  get nbands(): number {
    return this.distances.length;
  }

  field(id: number): Field | undefined {
    return this.byId.get(id);
  }

  rpc(id: number): Rpc | undefined {
    return this.rpcById.get(id);
  }

  /** The leaf with the given dotted name ("pos.x"), or undefined. */
  leafNamed(name: string): Leaf | undefined {
    return this.leaves.find((l) => l.name === name);
  }
}

function schemaError(msg: string): never {
  throw new ReplicaDecodeError("descriptor", msg);
}

/** Validates type t of a field of the structs on stack; structs it holds by reference go to pending. */
function validateType(t: Type, stack: StructType[], pending: StructType[]): void {
  const k = t.kind;
  const name = KIND_NAMES[k];
  const q = t.quant;
  if (!(k > K.Invalid && k < NUM_KINDS)) schemaError(`invalid kind ${k}`);
  if (isFloat(k) && q.mode !== 0 && (!(q.step > 0) || (q.mode === 2 && (q.nbits < 1 || q.nbits > 32)))) {
    schemaError(`invalid quantization (step ${q.step}, nbits ${q.nbits})`);
  }
  if (t.struct?.isClass) schemaError(`entity class ${t.struct.name} cannot be nested`);
  if (k === K.Nested) layoutStruct(t.struct!, stack, pending);
  if (k === K.Bag) {
    if (!validMapKey(t.key) || t.key === K.String) schemaError(`bag key kind ${t.key}: want an integer`);
    pending.push(t.struct!);
  }
  if (k === K.Map && !validMapKey(t.key)) schemaError(`map key kind ${t.key}: want an integer or string`);
  const e = t.elem;
  if (e && (k === K.List || k === K.Map)) {
    if (isContainer(e.kind)) schemaError(`${name} of ${KIND_NAMES[e.kind]}`);
    // A struct element is laid out on its own: a list may hold its own struct.
    if (e.kind === K.Nested) {
      if (e.struct!.isClass) schemaError(`entity class ${e.struct!.name} cannot be nested`);
      pending.push(e.struct!);
    } else validateType(e, stack, pending);
  }
}

function layoutStruct(s: StructType, stack: StructType[], pending: StructType[]): void {
  if (stack.includes(s)) schemaError(`struct ${s.name} contains itself`);
  if (s.state !== 0) return;
  s.state = 1;
  stack = [...stack, s];
  try {
    s.fields.sort((a, b) => a.id - b.id);
    s.byId = new Map();
    s.leaves = [];
    s.numSlots = s.objSlots = 0;
    for (const f of s.fields) {
      const where = `${s.name}.${f.name}`;
      if (f.id === 0 || s.byId.has(f.id)) schemaError(`${where}: field ID ${f.id} is reserved or a duplicate`);
      s.byId.set(f.id, f);
      validateType(f.type, stack, pending);
      f.leaf = s.leaves.length;
      if (f.deprecated) continue;
      // A nested struct's leaves, or the field as one leaf.
      const numeric = isNumeric(f.type.kind);
      const sub: Leaf[] = f.type.kind === K.Nested ? f.type.struct!.leaves : [{ index: 0, field: f, path: [], name: "", vis: 3, band: 0, num: numeric ? 0 : -1, obj: numeric ? -1 : 0 }];
      for (const l of sub) {
        s.leaves.push({
          index: s.leaves.length,
          field: l.field,
          path: [f.id, ...l.path],
          name: l.name ? `${f.name}.${l.name}` : f.name,
          vis: l.vis & f.vis,
          band: f.band,
          num: l.num >= 0 ? l.num + s.numSlots : -1,
          obj: l.obj >= 0 ? l.obj + s.objSlots : -1,
        });
      }
      if (f.type.kind === K.Nested) {
        s.numSlots += f.type.struct!.numSlots;
        s.objSlots += f.type.struct!.objSlots;
      } else if (numeric) s.numSlots++;
      else s.objSlots++;
      if (s.leaves.length > MAX_LEAVES) schemaError(`${s.name} flattens to more than ${MAX_LEAVES} fields`);
    }
    if (s.rpcs.length > 0 && !s.isClass) schemaError(`${s.name} declares RPCs but is not an entity class`);
    s.rpcs.sort((a, b) => a.id - b.id);
    s.rpcById = new Map();
    for (const r of s.rpcs) {
      if (r.id === 0 || s.rpcById.has(r.id)) schemaError(`${s.name}.${r.name}: RPC ID ${r.id} is reserved or a duplicate`);
      if (r.args.isClass) schemaError(`${s.name}.${r.name}: RPC arguments must be a struct type`);
      s.rpcById.set(r.id, r);
      pending.push(r.args);
    }
    s.state = 2;
  } catch (e) {
    s.state = 0;
    throw e;
  }
}

/** A set of entity classes, laid out. */
export class Schema {
  readonly classes: StructType[];
  private byId = new Map<number, StructType>();
  /** The descriptor this schema was decoded from, if it was (./descriptor.ts). */
  descriptor?: Uint8Array;

  /** Lays out the classes and everything they reach; throws a "descriptor" error if they do not lay out. */
  constructor(classes: StructType[]) {
    this.classes = [...classes].sort((a, b) => a.classId - b.classId);
    for (const c of this.classes) {
      if (!c.isClass) schemaError(`${c.name} is not an entity class`);
      if (this.byId.has(c.classId)) schemaError(`duplicate class ID ${c.classId}`);
      const pending = [c];
      while (pending.length > 0) layoutStruct(pending.pop()!, [], pending);
      this.byId.set(c.classId, c);
    }
  }

  /** The class with the given class ID, or undefined. */
  class(id: number): StructType | undefined {
    return this.byId.get(id);
  }

  /** The class with the given name, or undefined. */
  classNamed(name: string): StructType | undefined {
    return this.classes.find((c) => c.name === name);
  }
}

/**
 * Checks that data encoded with schema remote can be decoded into schema
 * local (§8): every field both have, matched by class ID and field ID path,
 * has the same type. Throws a ReplicaDecodeError with code "incompatible".
 */
export function checkCompatible(local: Schema, remote: Schema): void {
  const seen = new Map<StructType, Set<StructType>>();
  const fail = (where: string, what: string): never => {
    throw new ReplicaDecodeError("incompatible", `${where}: ${what} differ between the two schemas`);
  };
  const type = (l: Type, r: Type, where: string): void => {
    const a = l.quant;
    const b = r.quant;
    if (l.kind !== r.kind || l.key !== r.key || a.mode !== b.mode || !Object.is(a.step, b.step) || !Object.is(a.min, b.min) || a.nbits !== b.nbits) {
      fail(where, `types (${KIND_NAMES[l.kind]}, ${KIND_NAMES[r.kind]})`);
    }
    if (l.struct) struct(l.struct, r.struct!, where);
    if (l.elem) type(l.elem, r.elem!, where);
  };
  // Each pair of structs is checked once.
  const struct = (l: StructType, r: StructType, where: string): void => {
    const s = seen.get(l) ?? new Set();
    if (s.has(r)) return;
    seen.set(l, s.add(r));
    for (const rr of r.rpcs) {
      const lr = l.rpc(rr.id);
      if (!lr) continue;
      if (lr.dir !== rr.dir) fail(`${where}: RPC ${lr.name}`, "directions");
      struct(lr.args, rr.args, `${where}: RPC ${lr.name}`);
    }
    for (const rf of r.fields) {
      const lf = l.field(rf.id);
      if (lf && !lf.deprecated && !rf.deprecated) type(lf.type, rf.type, `${where}.${lf.name} (ID ${lf.id})`);
    }
  };
  if (local === remote) return;
  for (const rc of remote.classes) {
    const lc = local.class(rc.classId);
    if (lc) struct(lc, rc, `class ${lc.name}`);
  }
}
