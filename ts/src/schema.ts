/**
 * The schema model: kinds, types, structs and classes, their flattened leaf
 * layout (docs/protocol.md §5.5), and compatibility between two versions
 * of a schema (§8). Schemas come from descriptors (./descriptor.ts).
 */

import { ReplicaDecodeError } from "./errors.js";
import { Kind } from "./enums.js";
export { Kind, Vis } from "./enums.js";

export type KindValue = Kind;

/** Number of kinds: a kind ≥ this is invalid. */
export const NUM_KINDS = 19;

export const KIND_NAMES = [
  "invalid", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
  "float32", "float64", "string", "bytes", "ref", "nested", "list", "map", "bag",
] as const;

export const isNumeric = (k: number): boolean => (k >= Kind.Bool && k <= Kind.Float64) || k === Kind.Ref;
export const isSigned = (k: number): boolean => k >= Kind.Int8 && k <= Kind.Int64;
export const isContainer = (k: number): boolean => k === Kind.List || k === Kind.Map || k === Kind.Bag;
export const isFloat = (k: number): boolean => k === Kind.Float32 || k === Kind.Float64;
/** Whether k may key a map (integers and strings). */
export const validMapKey = (k: number): boolean => (k >= Kind.Int8 && k <= Kind.Uint64) || k === Kind.String;

/** Bit width W of a numeric kind (§3.2); ref is 32. */
export function kindWidth(k: number): number {
  switch (k) {
    case Kind.Bool:
      return 1;
    case Kind.Int8:
    case Kind.Uint8:
      return 8;
    case Kind.Int16:
    case Kind.Uint16:
      return 16;
    case Kind.Int32:
    case Kind.Uint32:
    case Kind.Float32:
    case Kind.Ref:
      return 32;
    case Kind.Int64:
    case Kind.Uint64:
    case Kind.Float64:
      return 64;
  }
  return 0;
}


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

export function typeString(t: Type): string {
  switch (t.kind) {
    case Kind.Float32:
    case Kind.Float64:
      if (t.quant.mode === 2) return `${KIND_NAMES[t.kind]} q(${t.quant.step},${t.quant.min},${t.quant.nbits})`;
      if (t.quant.mode === 1) return `${KIND_NAMES[t.kind]} q(${t.quant.step})`;
      break;
    case Kind.Nested:
      return t.struct!.name;
    case Kind.List:
      return `list<${typeString(t.elem!)}>`;
    case Kind.Map:
      return `map<${KIND_NAMES[t.key] ?? t.key},${typeString(t.elem!)}>`;
    case Kind.Bag:
      return `bag<${KIND_NAMES[t.key] ?? t.key},${t.struct!.name}>`;
  }
  return KIND_NAMES[t.kind] ?? `kind(${t.kind})`;
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
  /** @internal */ laidOut = false;
  /** @internal */ laying = false;

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
    for (const l of this.leaves) if (l.name === name) return l;
    return undefined;
  }
}

function schemaError(msg: string): never {
  throw new ReplicaDecodeError("descriptor", msg);
}

function validateType(t: Type, stack: StructType[], pending: StructType[]): void {
  const k = t.kind;
  if (k === Kind.Invalid || k >= NUM_KINDS) schemaError(`invalid kind ${k}`);
  switch (k) {
    case Kind.Float32:
    case Kind.Float64: {
      const q = t.quant;
      if (q.mode !== 0 && (!(q.step > 0) || (q.mode === 2 && (q.nbits < 1 || q.nbits > 32)))) {
        schemaError(`invalid quantization (step ${q.step}, nbits ${q.nbits})`);
      }
      return;
    }
    case Kind.Nested:
      if (t.struct!.isClass) schemaError(`entity class ${t.struct!.name} cannot be nested`);
      layoutStruct(t.struct!, stack, pending);
      return;
    case Kind.List:
    case Kind.Map:
      if (k === Kind.Map && !validMapKey(t.key)) schemaError(`map key kind ${t.key}: want an integer or string`);
      if (isContainer(t.elem!.kind)) schemaError(`${KIND_NAMES[k]} of ${KIND_NAMES[t.elem!.kind]}`);
      if (t.elem!.kind === Kind.Nested) {
        if (t.elem!.struct!.isClass) schemaError(`entity class ${t.elem!.struct!.name} cannot be nested`);
        pending.push(t.elem!.struct!);
        return;
      }
      validateType(t.elem!, stack, pending);
      return;
    case Kind.Bag:
      if (t.struct!.isClass) schemaError("bag items must be a struct type");
      if (!validMapKey(t.key) || t.key === Kind.String) schemaError(`bag key kind ${t.key}: want an integer`);
      pending.push(t.struct!);
      return;
  }
}

function layoutStruct(s: StructType, stack: StructType[], pending: StructType[]): void {
  if (s.laidOut) return;
  if (stack.includes(s)) schemaError(`struct ${s.name} contains itself`);
  if (s.laying) return;
  s.laying = true;
  stack = [...stack, s];
  try {
    s.fields.sort((a, b) => a.id - b.id);
    s.byId = new Map();
    s.leaves = [];
    s.numSlots = 0;
    s.objSlots = 0;
    for (const f of s.fields) {
      if (f.id === 0) schemaError(`${s.name}.${f.name}: field ID 0 is reserved`);
      if (s.byId.has(f.id)) schemaError(`${s.name}.${f.name}: duplicate field ID ${f.id}`);
      s.byId.set(f.id, f);
      validateType(f.type, stack, pending);
      f.leaf = s.leaves.length;
      if (f.deprecated) continue;
      const k = f.type.kind;
      if (k === Kind.Nested) {
        const sub = f.type.struct!;
        for (const l of sub.leaves) {
          s.leaves.push({
            index: s.leaves.length,
            field: l.field,
            path: [f.id, ...l.path],
            name: `${f.name}.${l.name}`,
            vis: l.vis & f.vis,
            band: f.band,
            num: l.num >= 0 ? l.num + s.numSlots : -1,
            obj: l.obj >= 0 ? l.obj + s.objSlots : -1,
          });
        }
        s.numSlots += sub.numSlots;
        s.objSlots += sub.objSlots;
      } else {
        const numeric = isNumeric(k);
        s.leaves.push({
          index: s.leaves.length,
          field: f,
          path: [f.id],
          name: f.name,
          vis: f.vis,
          band: f.band,
          num: numeric ? s.numSlots++ : -1,
          obj: numeric ? -1 : s.objSlots++,
        });
      }
      if (s.leaves.length > MAX_LEAVES) schemaError(`${s.name} flattens to more than ${MAX_LEAVES} fields`);
    }
    if (s.rpcs.length > 0 && !s.isClass) schemaError(`${s.name} declares RPCs but is not an entity class`);
    s.rpcs.sort((a, b) => a.id - b.id);
    s.rpcById = new Map();
    for (const r of s.rpcs) {
      if (r.id === 0) schemaError(`${s.name}.${r.name}: RPC ID 0 is reserved`);
      if (s.rpcById.has(r.id)) schemaError(`${s.name}.${r.name}: duplicate RPC ID`);
      if (r.args.isClass) schemaError(`${s.name}.${r.name}: RPC arguments must be a struct type`);
      s.rpcById.set(r.id, r);
      pending.push(r.args);
    }
    s.laidOut = true;
  } finally {
    s.laying = false;
  }
}

/** A set of entity classes, laid out. */
export class Schema {
  readonly classes: StructType[];
  private byId = new Map<number, StructType>();

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

function quantEqual(a: Quant, b: Quant): boolean {
  return a.mode === b.mode && Object.is(a.step, b.step) && Object.is(a.min, b.min) && a.nbits === b.nbits;
}

/**
 * Checks that data encoded with schema remote can be decoded into schema
 * local (§8): every field both have, matched by class ID and field ID path,
 * has the same type. Throws a ReplicaDecodeError with code "incompatible".
 */
export function checkCompatible(local: Schema, remote: Schema): void {
  if (local === remote) return;
  const seen = new Set<string>();
  const ids = new Map<StructType, number>();
  const idOf = (s: StructType): number => {
    let n = ids.get(s);
    if (n === undefined) ids.set(s, (n = ids.size));
    return n;
  };
  const incompatible = (msg: string): never => {
    throw new ReplicaDecodeError("incompatible", msg);
  };
  const compatType = (l: Type, r: Type, where: string): void => {
    if (l.kind !== r.kind || l.key !== r.key || !quantEqual(l.quant, r.quant)) {
      incompatible(`${where}: type ${typeString(l)} here, ${typeString(r)} on the other side`);
    }
    if (l.struct) compatStruct(l.struct, r.struct!, where);
    if (l.elem) compatType(l.elem, r.elem!, where);
  };
  const compatStruct = (l: StructType, r: StructType, where: string): void => {
    const key = `${idOf(l)},${idOf(r)}`;
    if (seen.has(key)) return;
    seen.add(key);
    for (const rr of r.rpcs) {
      const lr = l.rpc(rr.id);
      if (!lr) continue;
      if (lr.dir !== rr.dir) incompatible(`${where}: RPC ${lr.name} (ID ${lr.id}): directions differ`);
      compatStruct(lr.args, rr.args, `${where}: RPC ${lr.name}`);
    }
    for (const rf of r.fields) {
      const lf = l.field(rf.id);
      if (!lf || lf.deprecated || rf.deprecated) continue;
      compatType(lf.type, rf.type, `${where}.${lf.name} (ID ${lf.id})`);
    }
  };
  for (const rc of remote.classes) {
    const lc = local.class(rc.classId);
    if (lc) compatStruct(lc, rc, `class ${lc.name}`);
  }
}
