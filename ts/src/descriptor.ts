/**
 * The schema descriptor (docs/protocol.md §3): decoding with every check of
 * §3.5, and the canonical encoding (for tests and tools).
 *
 * The checks of a type on its own (kinds, quantization, keys, elements,
 * depth) are made as it is read; those between structs (classes nested,
 * recursion, sizes) by laying the schema out (./schema.ts); bands and the
 * canonical order here, once everything is read.
 */

import { BitWriter, decodeUTF8, encodeUTF8, bits, bool, bytes, count, finish, hi, load, pos, u, u32 } from "./bits.js";
import { ReplicaDecodeError } from "./errors.js";
import { Schema, StructType, bad, kindType, reach, type Quant, type Type } from "./schema.js";
import { f64FromBits, f64Bits, out } from "./values.js";
import { Kind } from "./enums.js";

/** The descriptor version of protocol versions 4 and later (§2). */
export const DESCRIPTOR_VERSION = 2;

/**
 * Decodes a descriptor and returns the schema it describes, laid out and
 * validated, with b as its descriptor (not copied). Every failure is a
 * ReplicaDecodeError with code "descriptor". Only the canonical encoding
 * is accepted (§3.1).
 */
export const decodeDescriptor = (b: Uint8Array): Schema => {
  load(b);
  try {
    const s = read();
    s.descriptor = b;
    return s;
  } catch (e) {
    if (!(e instanceof ReplicaDecodeError)) throw e;
    if (e.bit < 0) e.bit = pos;
    throw e.code === "descriptor" ? e : new ReplicaDecodeError("descriptor", e.message, e.bit);
  }
};

const f64 = (): number => f64FromBits(bits(32), bits(32));

const read = (): Schema => {
  const v = u32(0);
  if (v !== DESCRIPTOR_VERSION) bad(`version ${v}, want 2`);
  // The fewest bits an item takes, to check a count against the bits left
  // before allocating (tighter than §3.5's 8 bits, which rejects the same
  // descriptors, as truncated): a struct's name, field and RPC counts; a
  // field's ID gap, name, kind, flags and band; an RPC's ID gap, name,
  // direction and struct index.
  const n = count(2, 4096, 9, "structs");
  const structs = Array.from({ length: n }, () => new StructType(""));
  const index = (): StructType => structs[u32(2)] ?? bad("struct index");
  const name = (): { name: string; nameBytes: Uint8Array } => {
    const b = bytes(256);
    return { name: decodeUTF8(b), nameBytes: b };
  };
  const id = (prev: number): number => {
    const v = prev + 1 + u(2) + hi * 2 ** 32;
    return v > 0xffffffff ? bad("ID " + v) : v;
  };
  const type = (depth: number): Type => {
    if (depth > 4) bad("type nested too deeply");
    const kind = bits(5);
    const t = kindType(kind);
    if (kind === Kind.Float32 || kind === Kind.Float64) {
      const mode = bits(2);
      if (mode === 3) bad("quantization mode 3");
      if (mode) {
        const q = (t.quant = { mode, step: f64(), min: 0, nbits: 0 } as Quant);
        if (mode === 2) {
          q.min = f64();
          q.nbits = bits(6);
        }
        if (!(q.step > 0 && q.step < Infinity && Number.isFinite(q.min) && (mode === 1 || (q.nbits > 0 && q.nbits <= 32)))) {
          bad("quantization");
        }
      }
    } else if (kind === Kind.Nested) t.struct = index();
    else if (kind >= Kind.List && kind <= Kind.Bag) {
      const key = kind === Kind.List ? Kind.Int8 : (t.key = bits(5));
      // Map keys: integers and strings; bag keys: integers.
      if (key < Kind.Int8 || (key > Kind.Uint64 && (key !== Kind.String || kind === Kind.Bag))) bad("key kind " + key);
      if (kind === Kind.Bag) t.struct = index();
      else if ((t.elem = type(depth + 1)).kind >= Kind.List) bad("element kind " + t.elem.kind);
    } else if (kind === Kind.Invalid || kind > Kind.Bag) bad("kind " + kind);
    return t;
  };

  let fields = 0;
  let rpcs = 0;
  for (const st of structs) {
    Object.assign(st, name());
    for (let j = count(2, 65536 - fields, 20, "fields"), prev = 0; j > 0; j--, fields++) {
      prev = id(prev);
      st.fields.push({ id: prev, ...name(), type: type(0), vis: bits(2), life: bits(2), chan: bits(1), deprecated: bool(), band: u32(0), leaf: 0 });
    }
    for (let j = count(0, 4096 - rpcs, 12, "RPCs"), prev = 0; j > 0; j--, rpcs++) {
      prev = id(prev);
      st.rpcs.push({ id: prev, ...name(), dir: bits(1), args: index() });
    }
  }

  const classes: StructType[] = [];
  for (let i = count(2, n, 2, "classes"); i > 0; i--) {
    const c = index();
    if (c.isClass) bad(c.name + " listed twice");
    c.isClass = true;
    c.classId = u32(4);
    const nb = u32(0);
    if (nb > 4) bad(nb + " bands");
    for (let b = 0; b < nb; b++) {
      const d = f64();
      // Finite, > 0, each smaller than the one before.
      if (!(d > 0 && d < (c.distances[b - 1] ?? Infinity))) bad(`${c.name}: band ${b + 1} distance ${d}`);
      c.distances.push(d);
    }
    classes.push(c);
  }
  finish();

  // Bands (§3.5): only in classes, at most the class's nbands, each used.
  // Lifetimes: only in classes.
  for (const st of structs) {
    const used = new Set<number>();
    for (const f of st.fields) {
      if (f.band > st.nbands) bad(`${st.name}.${f.name}: band ${f.band} > ${st.nbands}`);
      if (f.life && !st.isClass) bad(`${st.name}.${f.name}: lifetime ${f.life} outside a class`);
      used.add(f.band);
    }
    for (let b = 1; b <= st.nbands; b++) if (!used.has(b)) bad(`${st.name}: band ${b} has no field`);
  }

  // The canonical order (§3.1): classes by ascending class ID, the structs
  // in depth-first pre-order from them (the structs of each field's type,
  // then the RPCs' arguments), every struct reached. Every other field has
  // one encoding, so a descriptor in this order is canonical: it is what
  // writeDescriptor writes for its schema.
  let i = 0;
  let ok = classes.every((c, j) => !j || c.classId > classes[j - 1]!.classId);
  for (const st of reach(classes)) ok &&= st === structs[i++];
  if (!ok || i < n) bad("not canonical");
  return new Schema(classes);
};

const writeFloat = (w: BitWriter, x: number): void => {
  f64Bits(x);
  w.bits(out.lo, 32);
  w.bits(out.hi, 32);
};

/**
 * Encodes a schema as a descriptor (§3.1): the canonical form, structs in
 * depth-first pre-order from the classes in ascending class-ID order.
 */
export const writeDescriptor = (s: Schema): Uint8Array => {
  const structs = [...reach(s.classes)];
  const index = new Map(structs.map((st, i) => [st, i]));
  const w = new BitWriter();
  const name = (x: { name: string; nameBytes?: Uint8Array }): void => w.bytes(x.nameBytes ?? encodeUTF8(x.name));
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
  w.u(DESCRIPTOR_VERSION, 0);
  w.u(structs.length, 2);
  for (const st of structs) {
    name(st);
    w.u(st.fields.length, 2);
    let prev = 0;
    for (const f of st.fields) {
      w.u(f.id - prev - 1, 2);
      prev = f.id;
      name(f);
      writeType(f.type);
      w.bits(f.vis, 2);
      w.bits(f.life, 2);
      w.bits(f.chan, 1);
      w.bool(f.deprecated);
      w.u(f.band, 0);
    }
    w.u(st.rpcs.length, 0);
    prev = 0;
    for (const r of st.rpcs) {
      w.u(r.id - prev - 1, 2);
      prev = r.id;
      name(r);
      w.bits(r.dir, 1);
      w.u(index.get(r.args)!, 2);
    }
  }
  w.u(s.classes.length, 2);
  for (const c of s.classes) {
    w.u(index.get(c)!, 2);
    w.u(c.classId, 4);
    w.u(c.distances.length, 0);
    for (const d of c.distances) writeFloat(w, d);
  }
  return w.finish();
};
