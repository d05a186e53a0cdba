/**
 * The schema descriptor (docs/protocol.md §3): decoding with every check of
 * §3.5, and the canonical encoding that decoding compares against.
 *
 * VERSIONS. This file is the one place that knows descriptor versions:
 * {@link DESCRIPTOR_VERSION} is the version the protocol specifies (2, with
 * level-of-detail bands, §3.6), read through {@link formatOf}.
 */

import { BitReader, BitWriter, decodeUTF8, encodeUTF8 } from "./bits.js";
import { ReplicaDecodeError } from "./errors.js";
import { NO_QUANT, Schema, StructType, type Field, type Quant, type Rpc, type Type } from "./schema.js";
import { Kind } from "./enums.js";

/** The descriptor version of protocol version 4 (§2). */
export const DESCRIPTOR_VERSION = 2;

/** Options of {@link decodeDescriptor}; none yet. */
export type DescriptorOptions = Record<string, never>;

/** What a descriptor version carries. */
interface Format {
  version: number;
  /** Fields carry a `band`, classes `nbands` and distances (§3.6). */
  bands: boolean;
}

/** The format of descriptor version v, or undefined if v is not accepted. */
function formatOf(v: number): Format | undefined {
  if (v === DESCRIPTOR_VERSION) return { version: v, bands: true };
  return undefined;
}

// Limits of §3.5: a descriptor is read before anything else, so it is
// bounded independently of any configuration.
const MAX_STRUCTS = 4096;
const MAX_FIELDS = 65536; // all structs together
const MAX_RPCS = 4096; // all classes together (schema/descriptor.go)
const MAX_NAME = 256;
const MAX_BANDS = 4;
const MAX_DESC_LEAVES = 1 << 20; // all structs' leaves, nesting flattened (schema/descriptor.go)
const MAX_TYPE_DEPTH = 4;

// The fewest bits an item can take, to check a count against the bits left
// before allocating (tighter than the 8 bits of §3.5, which rejects the
// same descriptors, as truncated).
const MIN_STRUCT_BITS = 5 + 3 + 1; // name, field count, RPC count
const MIN_RPC_BITS = 3 + 5 + 1 + 3; // ID gap, name, direction, struct index
const minFieldBits = (fmt: Format): number => 3 + 5 + 5 + 6 + (fmt.bands ? 1 : 0); // ID gap, name, kind, flags, band

/** Reads a name: its text and, for the canonical re-encoding, its bytes (names need not be UTF-8). */
function readName(r: BitReader): [string, Uint8Array] {
  const b = r.bytes(MAX_NAME);
  return [decodeUTF8(b), b];
}

function writeName(w: BitWriter, name: string, bytes: Uint8Array | undefined): void {
  w.bytes(bytes ?? encodeUTF8(name));
}

function bad(r: BitReader, msg: string): never {
  throw new ReplicaDecodeError("descriptor", msg, r.pos);
}

/** A decoded descriptor: the schema and the version it was written in. */
export interface Descriptor {
  schema: Schema;
  version: number;
}

/**
 * Decodes a descriptor and returns the schema it describes, laid out and
 * validated, with b as its descriptor (not copied). Every failure is a
 * ReplicaDecodeError with code "descriptor". Only the canonical encoding
 * is accepted (§3.1).
 */
export function decodeDescriptor(b: Uint8Array, opts: DescriptorOptions = {}): Schema {
  return decodeDescriptorVersioned(b, opts).schema;
}

/** decodeDescriptor, also returning the version. */
export function decodeDescriptorVersioned(b: Uint8Array, opts: DescriptorOptions = {}): Descriptor {
  let d: Descriptor;
  try {
    d = decodeRaw(b, opts);
  } catch (e) {
    if (e instanceof ReplicaDecodeError) {
      if (e.code === "descriptor") throw e;
      const err = new ReplicaDecodeError("descriptor", `${e.code}: ${e.message}`, e.bit);
      throw err;
    }
    throw e;
  }
  d.schema.descriptor = b;
  return d;
}

/**
 * Whether structs and classes, as a descriptor listed them, are in the
 * canonical order (§3.1): classes by ascending class ID, and the structs
 * in depth-first pre-order from them (the structs of each field's type,
 * then the RPCs' arguments), every struct reached. Every other field has
 * one encoding, so a descriptor in this order is canonical: it is what
 * writeDescriptor writes for its schema.
 */
function canonicalOrder(structs: StructType[], classes: StructType[]): boolean {
  const order = new Set<StructType>();
  const visit = (st: StructType | null): void => {
    if (!st || order.has(st)) return;
    order.add(st);
    for (const f of st.fields) for (let t: Type | null = f.type; t; t = t.elem) visit(t.struct);
    for (const r of st.rpcs) visit(r.args);
  };
  classes.forEach(visit);
  let i = 0;
  for (const st of order) if (st !== structs[i++]) return false;
  return i === structs.length && classes.every((c, j) => j === 0 || c.classId > classes[j - 1]!.classId);
}

function readQuantFloat(r: BitReader): number {
  const lo = r.bits(32);
  const hi = r.bits(32);
  F64_U32[0] = lo;
  F64_U32[1] = hi;
  return F64[0]!;
}

const F64 = new Float64Array(1);
const F64_U32 = new Uint32Array(F64.buffer);

function decodeRaw(b: Uint8Array, opts: DescriptorOptions): Descriptor {
  const r = new BitReader(b);
  const v = r.u(0);
  const fmt = r.hi === 0 ? formatOf(v) : undefined;
  if (!fmt) bad(r, `version ${r.hi === 0 ? v : "≥ 2^32"}, want ${DESCRIPTOR_VERSION}`);

  const n = r.count(2, MAX_STRUCTS, MIN_STRUCT_BITS, "structs");
  const structs: StructType[] = [];
  for (let i = 0; i < n; i++) structs.push(new StructType(""));
  let fields = 0;
  let rpcs = 0;
  const structAt = (): StructType => {
    const i = r.u(2);
    if (r.hi !== 0 || i >= n) bad(r, `struct index ${i} out of range`);
    return structs[i]!;
  };
  const readType = (depth: number): Type => {
    if (depth > MAX_TYPE_DEPTH) bad(r, "type nested too deeply");
    const t: Type = { kind: r.bits(5), quant: NO_QUANT, struct: null, elem: null, key: 0 };
    switch (t.kind) {
      case Kind.Bool: case Kind.Int8: case Kind.Int16: case Kind.Int32: case Kind.Int64:
      case Kind.Uint8: case Kind.Uint16: case Kind.Uint32: case Kind.Uint64:
      case Kind.String: case Kind.Bytes: case Kind.Ref:
        break;
      case Kind.Float32:
      case Kind.Float64: {
        const mode = r.bits(2);
        if (mode === 3) bad(r, "quantization mode 3");
        if (mode !== 0) {
          const q: Quant = { mode: mode as 1 | 2, step: readQuantFloat(r), min: 0, nbits: 0 };
          if (mode === 2) {
            q.min = readQuantFloat(r);
            q.nbits = r.bits(6);
            if (!Number.isFinite(q.min)) bad(r, "invalid quantization minimum");
          }
          if (!(q.step > 0) || !Number.isFinite(q.step)) bad(r, "invalid quantization step");
          t.quant = q;
        }
        break;
      }
      case Kind.Nested:
        t.struct = structAt();
        break;
      case Kind.List:
        t.elem = readType(depth + 1);
        break;
      case Kind.Map:
        t.key = r.bits(5);
        t.elem = readType(depth + 1);
        break;
      case Kind.Bag:
        t.key = r.bits(5);
        t.struct = structAt();
        break;
      default:
        bad(r, `kind ${t.kind}`);
    }
    return t;
  };
  const readField = (prev: number): Field => {
    const id = prev + 1 + r.u(2) + r.hi * 2 ** 32;
    if (id > 0xffffffff) bad(r, "field ID out of range");
    const [name, nameBytes] = readName(r);
    const type = readType(0);
    const f: Field = {
      id,
      name,
      type,
      vis: r.bits(2),
      life: r.bits(2),
      chan: r.bits(1),
      deprecated: r.bool(),
      band: 0,
      leaf: 0,
      nameBytes,
    };
    if (fmt.bands) {
      f.band = r.u(0);
      if (r.hi !== 0 || f.band > MAX_BANDS) bad(r, `field ${name}: band ${f.band} out of range`);
    }
    return f;
  };

  for (const st of structs) {
    [st.name, st.nameBytes] = readName(r);
    const nf = r.count(2, MAX_FIELDS - fields, minFieldBits(fmt), "fields");
    fields += nf;
    let prev = 0;
    for (let j = 0; j < nf; j++) {
      const f = readField(prev);
      prev = f.id;
      st.fields.push(f);
    }
    const nr = r.count(0, MAX_RPCS - rpcs, MIN_RPC_BITS, "RPCs");
    rpcs += nr;
    prev = 0;
    for (let j = 0; j < nr; j++) {
      const id = prev + 1 + r.u(2) + r.hi * 2 ** 32;
      if (id > 0xffffffff) bad(r, "RPC ID out of range");
      prev = id;
      const [name, nameBytes] = readName(r);
      const rpc: Rpc = { id, name, nameBytes, dir: r.bits(1), args: structs[0]! };
      rpc.args = structAt();
      st.rpcs.push(rpc);
    }
  }

  const nc = r.count(2, n, 2, "classes");
  const classes: StructType[] = [];
  for (let i = 0; i < nc; i++) {
    const c = structAt();
    const id = r.u(4);
    if (r.hi !== 0) bad(r, "class entry out of range");
    if (c.isClass) bad(r, `struct ${c.name} listed as a class twice`);
    c.isClass = true;
    c.classId = id;
    if (fmt.bands) readBands(r, c);
    classes.push(c);
  }
  r.finish("class list");
  if (fmt.bands) checkBands(r, structs);
  leafBudget(structs);
  const schema = new Schema(classes);
  if (!canonicalOrder(structs, classes)) bad(r, "not in canonical form (unreachable structs, or classes or structs out of order)");
  return { schema, version: fmt.version };
}

/** Reads a class entry's nbands and distances (§3.1, §3.6). */
function readBands(r: BitReader, c: StructType): void {
  const nb = r.u(0);
  if (r.hi !== 0 || nb > MAX_BANDS) bad(r, `class ${c.name}: ${nb} bands > ${MAX_BANDS}`);
  for (let b = 0; b < nb; b++) {
    const d = readQuantFloat(r);
    if (!Number.isFinite(d) || !(d > 0)) bad(r, `class ${c.name}: band ${b + 1} distance ${d}`);
    if (b > 0 && !(d < c.distances[b - 1]!)) bad(r, `class ${c.name}: band distances not strictly decreasing`);
    c.distances.push(d);
  }
}

/** The band checks of §3.5 that need the whole descriptor. */
function checkBands(r: BitReader, structs: StructType[]): void {
  for (const st of structs) {
    const used = new Array<boolean>(st.nbands + 1).fill(false);
    for (const f of st.fields) {
      if (f.band === 0) continue;
      if (!st.isClass) bad(r, `${st.name}.${f.name}: a band in a struct that is not a class`);
      if (f.band > st.nbands) bad(r, `${st.name}.${f.name}: band ${f.band} > ${st.nbands}`);
      used[f.band] = true;
    }
    for (let b = 1; b <= st.nbands; b++) {
      if (!used[b]) bad(r, `class ${st.name}: band ${b} has no field`);
    }
  }
}

/**
 * Counts the leaves every struct would flatten to, without laying anything
 * out: a few hundred bytes of descriptor can name billions of flattened
 * fields. Also catches inline recursion.
 */
function leafBudget(structs: StructType[]): void {
  const memo = new Map<StructType, number>();
  const VISITING = -1;
  const count = (s: StructType): number => {
    const m = memo.get(s);
    if (m === VISITING) throw new ReplicaDecodeError("descriptor", `struct ${s.name} contains itself`);
    if (m !== undefined) return m;
    memo.set(s, VISITING);
    let total = 0;
    for (const f of s.fields) {
      total += f.type.kind === Kind.Nested && f.type.struct ? count(f.type.struct) : 1;
      if (total > MAX_DESC_LEAVES) {
        throw new ReplicaDecodeError("descriptor", `more than ${MAX_DESC_LEAVES} fields once nested structs are flattened`);
      }
    }
    memo.set(s, total);
    return total;
  };
  let total = 0;
  for (const s of structs) {
    total += count(s);
    if (total > MAX_DESC_LEAVES) {
      throw new ReplicaDecodeError("descriptor", `more than ${MAX_DESC_LEAVES} fields once nested structs are flattened`);
    }
  }
}

function writeFloat(w: BitWriter, x: number): void {
  F64[0] = x;
  w.bits(F64_U32[0]!, 32);
  w.bits(F64_U32[1]!, 32);
}

/**
 * Encodes a schema as a descriptor of the given version (§3.1): the
 * canonical form, structs in depth-first pre-order from the classes in
 * ascending class-ID order.
 */
export function writeDescriptor(s: Schema, version: number = DESCRIPTOR_VERSION): Uint8Array {
  const fmt = formatOf(version);
  if (!fmt) throw new Error(`unknown descriptor version ${version}`);
  const structs: StructType[] = [];
  const index = new Map<StructType, number>();
  const visit = (st: StructType): void => {
    if (index.has(st)) return;
    index.set(st, structs.length);
    structs.push(st);
    for (const f of st.fields) visitType(f.type);
    for (const r of st.rpcs) visit(r.args);
  };
  const visitType = (t: Type): void => {
    if (t.struct) visit(t.struct);
    if (t.elem) visitType(t.elem);
  };
  for (const c of s.classes) visit(c);
  const w = new BitWriter();
  const writeType = (t: Type): void => {
    w.bits(t.kind, 5);
    switch (t.kind) {
      case Kind.Float32:
      case Kind.Float64:
        w.bits(t.quant.mode, 2);
        if (t.quant.mode !== 0) writeFloat(w, t.quant.step);
        if (t.quant.mode === 2) {
          writeFloat(w, t.quant.min);
          w.bits(t.quant.nbits, 6);
        }
        break;
      case Kind.Nested:
        w.u(index.get(t.struct!)!, 2);
        break;
      case Kind.List:
        writeType(t.elem!);
        break;
      case Kind.Map:
        w.bits(t.key, 5);
        writeType(t.elem!);
        break;
      case Kind.Bag:
        w.bits(t.key, 5);
        w.u(index.get(t.struct!)!, 2);
        break;
    }
  };
  w.u(fmt.version, 0);
  w.u(structs.length, 2);
  for (const st of structs) {
    writeName(w, st.name, st.nameBytes);
    w.u(st.fields.length, 2);
    let prev = 0;
    for (const f of st.fields) {
      w.u(f.id - prev - 1, 2);
      prev = f.id;
      writeName(w, f.name, f.nameBytes);
      writeType(f.type);
      w.bits(f.vis, 2);
      w.bits(f.life, 2);
      w.bits(f.chan, 1);
      w.bool(f.deprecated);
      if (fmt.bands) w.u(f.band, 0);
    }
    w.u(st.rpcs.length, 0);
    prev = 0;
    for (const r of st.rpcs) {
      w.u(r.id - prev - 1, 2);
      prev = r.id;
      writeName(w, r.name, r.nameBytes);
      w.bits(r.dir, 1);
      w.u(index.get(r.args)!, 2);
    }
  }
  w.u(s.classes.length, 2);
  for (const c of s.classes) {
    w.u(index.get(c)!, 2);
    w.u(c.classId, 4);
    if (fmt.bands) {
      w.u(c.distances.length, 0);
      for (const d of c.distances) writeFloat(w, d);
    }
  }
  return w.finish();
}
