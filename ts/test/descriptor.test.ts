// The schema descriptor (docs/protocol.md §3): canonical round trips at
// version 2 with bands, and every rejection of §3.5.
import { describe, expect, test } from "vitest";
import { decodeDescriptor, writeDescriptor } from "../src/descriptor.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { Kind, NO_QUANT, Schema, StructType, checkCompatible } from "../src/schema.js";
import { field, quant, struct, ty, unitSchema } from "./schemas.js";
import { tohex } from "./helpers.js";
import { BitWriter } from "../src/bits.js";

/** A schema without validation, for writing descriptors that must be rejected. */
const raw = (...classes: StructType[]): Schema => ({ classes }) as unknown as Schema;

function rejects(b: Uint8Array, pattern?: RegExp): ReplicaDecodeError {
  try {
    decodeDescriptor(b);
  } catch (e) {
    expect(e).toBeInstanceOf(ReplicaDecodeError);
    const err = e as ReplicaDecodeError;
    expect(err.code).toBe("descriptor");
    if (pattern) expect(err.message).toMatch(pattern);
    return err;
  }
  throw new Error("descriptor accepted");
}

/** A rich schema: nested structs, containers of every kind, quantization, RPCs, bands. */
export function richSchema(): Schema {
  const vec = struct("Vec", [field(1, "x", ty(Kind.Float32, { quant: quant({ mode: 2, step: 1 / 64, min: -100, nbits: 14 }) })), field(3, "y", ty(Kind.Float32))]);
  const item = struct("Item", [field(1, "name", ty(Kind.String)), field(2, "n", ty(Kind.Uint16)), field(4, "tags", ty(Kind.List, { elem: ty(Kind.String) }))]);
  const args = struct("HitArgs", [field(1, "dmg", ty(Kind.Int32)), field(2, "at", ty(Kind.Nested, { struct: vec }))]);
  const node = struct("Node", []);
  node.fields = [field(1, "v", ty(Kind.Int8)), field(2, "kids", ty(Kind.List, { elem: ty(Kind.Nested, { struct: node }) }))];
  const hero = struct(
    "Hero",
    [
      field(1, "name", ty(Kind.String)),
      field(2, "hp", ty(Kind.Int16)),
      field(3, "pos", ty(Kind.Nested, { struct: vec })),
      field(5, "gold", ty(Kind.Uint64), { vis: 1, band: 2 }),
      field(6, "angle", ty(Kind.Float64, { quant: quant({ mode: 1, step: 0.001 }) }), { band: 1 }),
      field(7, "inv", ty(Kind.Bag, { key: Kind.Uint32, struct: item }), { band: 2 }),
      field(8, "stats", ty(Kind.Map, { key: Kind.String, elem: ty(Kind.Float64) })),
      field(9, "tree", ty(Kind.Nested, { struct: node }), { deprecated: true, band: 1 }),
      field(10, "who", ty(Kind.Ref)),
      field(11, "bin", ty(Kind.Bytes), { vis: 2 }),
      field(12, "grid", ty(Kind.Map, { key: Kind.Int16, elem: ty(Kind.Nested, { struct: vec }) })),
    ],
    { id: 7, distances: [100, 25.5] },
  );
  hero.rpcs = [
    { id: 1, name: "hit", dir: 1, args },
    { id: 4, name: "jump", dir: 0, args: struct("Empty", []) },
  ];
  const rock = struct("Rock", [field(1, "size", ty(Kind.Uint8))], { id: 2 });
  return new Schema([hero, rock]);
}

describe("descriptor round trips", () => {
  test("version 2 with bands, RPCs, recursion through a list, every container", () => {
    const s = richSchema();
    const b = writeDescriptor(s);
    expect(b[0]! & 7).toBe(0b011); // U(0) = 2: stream bits 110
    const d = { schema: decodeDescriptor(b) };
    expect(tohex(writeDescriptor(d.schema))).toBe(tohex(b));
    const hero = d.schema.class(7)!;
    expect(hero.distances).toEqual([100, 25.5]);
    expect(hero.leafNamed("gold")!.band).toBe(2);
    expect(hero.leafNamed("pos.x")!.band).toBe(0);
    expect(hero.rpc(4)!.name).toBe("jump");
    expect(hero.leaves.map((l) => l.name)).toEqual(["name", "hp", "pos.x", "pos.y", "gold", "angle", "inv", "stats", "who", "bin", "grid"]);
    expect(d.schema.classes.map((c) => c.classId)).toEqual([2, 7]);
    checkCompatible(s, d.schema);
  });

  test("version 1 (protocol version 3) is refused", () => {
    const v1 = new Uint8Array([0x01]);
    rejects(v1, /version 1, want 2/);
  });

  test("the §9 schema at version 2", () => {
    // §9.1 shows the version-1 bytes (and predates the RPC count); at
    // version 2 each field gains a band bit and the class an nbands bit.
    expect(tohex(writeDescriptor(unitSchema()))).toBe("2354e59646471034b83180c0530c0802");
    expect(tohex(writeDescriptor(decodeDescriptor(writeDescriptor(unitSchema()))))).toBe("2354e59646471034b83180c0530c0802");
  });
});

describe("§3.5 rejections", () => {
  const unit = (): StructType => struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32))], { id: 1 });

  test("version", () => {
    for (const v of [0, 1, 3, 4]) {
      const w = new BitWriter();
      w.u(v, 0);
      rejects(w.finish(), new RegExp(`version ${v}`));
    }
  });

  test("a count larger than the input or its limit", () => {
    const b = writeDescriptor(raw(unit()));
    rejects(b.subarray(0, b.length - 3));
    // nstructs 5000 > 4096
    const w = Uint8Array.from([0b0011, 0, 0, 0, 0, 0]);
    void w;
    const big = struct("Big", [], { id: 1 });
    for (let i = 1; i <= 10; i++) big.fields.push(field(i, "f" + i, ty(Kind.Bool)));
    rejects(writeDescriptor(raw(big)).subarray(0, 20));
  });

  test("name longer than 256 bytes", () => {
    const s = unit();
    s.name = "n".repeat(257);
    rejects(writeDescriptor(raw(s)), /limit/);
  });

  test("kinds 0 and ≥ 19, quantmode 3", () => {
    for (const k of [0, 19, 31]) {
      const s = unit();
      s.fields[0]!.type = ty(k);
      rejects(writeDescriptor(raw(s)), /kind/);
      const l = unit();
      l.fields[0]!.type = ty(Kind.List, { elem: ty(k) });
      rejects(writeDescriptor(raw(l)), /kind/);
    }
    const q = unit();
    q.fields[1]!.type = ty(Kind.Float32, { quant: { mode: 3 as 2, step: 1, min: 0, nbits: 8 } });
    rejects(writeDescriptor(raw(q)), /quantization mode 3/);
  });

  test("bad quantization parameters", () => {
    const bads = [
      { mode: 1, step: 0 },
      { mode: 1, step: -1 },
      { mode: 1, step: Infinity },
      { mode: 1, step: NaN },
      { mode: 2, step: 1, min: NaN, nbits: 8 },
      { mode: 2, step: 1, min: -Infinity, nbits: 8 },
      { mode: 2, step: 1, min: 0, nbits: 0 },
      { mode: 2, step: 1, min: 0, nbits: 33 },
    ] as const;
    for (const q of bads) {
      const s = unit();
      s.fields[1]!.type = ty(Kind.Float32, { quant: quant(q) });
      rejects(writeDescriptor(raw(s)));
    }
  });

  test("types nested more than 4 levels", () => {
    let t = ty(Kind.Int8);
    for (let i = 0; i < 5; i++) t = ty(Kind.List, { elem: t });
    const s = unit();
    s.fields[0]!.type = t;
    rejects(writeDescriptor(raw(s)), /nested too deeply/);
  });

  test("struct index out of range, class listed twice, class ID too large", () => {
    const s = unit();
    const b = writeDescriptor(raw(s));
    // Same descriptor with nclasses 2 naming struct 0 twice: rebuild by hand.
    const twice = struct("Unit", s.fields, { id: 1 });
    const w = writeDescriptor(raw(twice, twice));
    rejects(w, /(twice|limit)/);
    const huge = unit();
    huge.classId = 2 ** 32;
    rejects(writeDescriptor(raw(huge)), /over 32 bits/);
    const nested = unit();
    nested.fields.push(field(3, "v", ty(Kind.Nested, { struct: unit() })));
    void b;
  });

  test("bands: too many, bad distances, in a non-class struct, above nbands, empty band", () => {
    const five = unit();
    five.distances = [50, 40, 30, 20, 10];
    five.fields.forEach((f, i) => (f.band = i + 1));
    rejects(writeDescriptor(raw(five)), /bands/);
    for (const d of [[NaN], [Infinity], [0], [-1], [10, 10], [10, 20]]) {
      const s = unit();
      s.distances = d;
      s.fields[0]!.band = 1;
      if (d.length > 1) s.fields[1]!.band = 2;
      rejects(writeDescriptor(raw(s)), /distance/);
    }
    const inner = struct("Inner", [field(1, "a", ty(Kind.Int8), { band: 1 })]);
    const outer = unit();
    outer.distances = [10];
    outer.fields[0]!.band = 1;
    outer.fields.push(field(3, "in", ty(Kind.Nested, { struct: inner })));
    rejects(writeDescriptor(raw(outer)), /Inner.a: band 1 > 0/);
    const above = unit();
    above.distances = [10];
    above.fields[0]!.band = 2;
    rejects(writeDescriptor(raw(above)), /band 2 > 1/);
    const empty = unit();
    empty.distances = [10, 5];
    empty.fields[0]!.band = 2;
    rejects(writeDescriptor(raw(empty)), /band 1 has no field/);
    const ok = unit();
    ok.distances = [10, 5];
    ok.fields[0]!.band = 2;
    ok.fields.push(field(3, "old", ty(Kind.Int8), { band: 1, deprecated: true }));
    expect(decodeDescriptor(writeDescriptor(raw(ok))).class(1)!.nbands).toBe(2);
  });

  test("lifetimes: on class fields only", () => {
    const persist = unit();
    persist.fields[0]!.life = 3;
    expect(decodeDescriptor(writeDescriptor(raw(persist))).class(1)!.fields[0]!.life).toBe(3);
    const inner = struct("Inner", [field(1, "a", ty(Kind.Int8), { life: 3 })]);
    const outer = unit();
    outer.fields.push(field(3, "in", ty(Kind.Nested, { struct: inner })));
    rejects(writeDescriptor(raw(outer)), /Inner.a: lifetime 3 outside a class/);
  });

  test("trailing data and non-zero padding", () => {
    const b = writeDescriptor(raw(unit()));
    rejects(Uint8Array.from([...b, 0]), /trailing/);
    // 16 bytes = 128 bits; the v2 Unit descriptor has 122: set a padding bit.
    const p = Uint8Array.from(b);
    p[p.length - 1]! |= 0x80;
    rejects(p, /trailing/);
  });

  test("schemas that do not lay out", () => {
    const dup = [unit(), unit()];
    rejects(writeDescriptor(raw(...dup)), /canonical/); // class IDs strictly ascending
    const asNested = unit();
    const other = struct("Other", [field(1, "u", ty(Kind.Nested, { struct: asNested }))], { id: 2 });
    rejects(writeDescriptor(raw(asNested, other)), /u nests a class/);
    const mapKey = unit();
    mapKey.fields[0]!.type = ty(Kind.Map, { key: Kind.Float32, elem: ty(Kind.Int8) });
    rejects(writeDescriptor(raw(mapKey)), /key kind 10/);
    const bagKey = unit();
    bagKey.fields[0]!.type = ty(Kind.Bag, { key: Kind.String, struct: struct("It", []) });
    rejects(writeDescriptor(raw(bagKey)), /key kind 12/);
    const listList = unit();
    listList.fields[0]!.type = ty(Kind.List, { elem: ty(Kind.List, { elem: ty(Kind.Int8) }) });
    rejects(writeDescriptor(raw(listList)), /element kind 16/);
    const self = struct("Self", []);
    self.fields = [field(1, "me", ty(Kind.Nested, { struct: self }))];
    const holder = unit();
    holder.fields.push(field(3, "s", ty(Kind.Nested, { struct: self })));
    rejects(writeDescriptor(raw(holder)), /contains itself/);
  });

  test("more than 65536 leaves once flattened", () => {
    // 5 levels of 10 nested fields: 10^5 leaves from a tiny descriptor.
    let s = struct("L0", Array.from({ length: 10 }, (_, i) => field(i + 1, "f", ty(Kind.Bool))));
    for (let d = 1; d < 5; d++) {
      const inner = s;
      s = struct("L" + d, Array.from({ length: 10 }, (_, i) => field(i + 1, "f", ty(Kind.Nested, { struct: inner }))));
    }
    const c = struct("C", [field(1, "x", ty(Kind.Nested, { struct: s }))], { id: 1 });
    rejects(writeDescriptor(raw(c)), /too many fields/);
  });

  test("only the canonical form", () => {
    const a = unit();
    const b = struct("B", [field(1, "v", ty(Kind.Int8))], { id: 2 });
    const good = writeDescriptor(raw(a, b));
    decodeDescriptor(good);
    // Classes out of ID order: the writer lists them as given.
    const swapped = writeDescriptor({ classes: [b, a] } as unknown as Schema);
    rejects(swapped, /canonical/);
  });

  test("never anything but the typed error on random input", () => {
    let seed = 7;
    const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    const base = writeDescriptor(richSchema());
    for (let i = 0; i < 1500; i++) {
      const b = Uint8Array.from(base);
      const n = 1 + (rnd() % 4);
      for (let j = 0; j < n; j++) b[rnd() % b.length]! ^= 1 << (rnd() % 8);
      const cut = i % 5 === 0 ? b.subarray(0, rnd() % b.length) : b;
      try {
        const s = decodeDescriptor(cut);
        expect(tohex(writeDescriptor(s))).toBe(tohex(cut));
      } catch (e) {
        expect(e).toBeInstanceOf(ReplicaDecodeError);
      }
    }
  });
});

describe("compatibility (§8)", () => {
  test("same field IDs with different types are incompatible; added and removed fields are fine", () => {
    const l = new Schema([struct("U", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32))], { id: 1 })]);
    const added = new Schema([struct("U", [field(1, "hp", ty(Kind.Int16)), field(3, "y", ty(Kind.Float32))], { id: 1 })]);
    checkCompatible(l, added);
    const changed = new Schema([struct("U", [field(1, "hp", ty(Kind.Int32))], { id: 1 })]);
    expect(() => checkCompatible(l, changed)).toThrow(/incompatible/);
    const q = new Schema([struct("U", [field(2, "x", ty(Kind.Float32, { quant: quant({ mode: 1, step: 0.5 }) }))], { id: 1 })]);
    expect(() => checkCompatible(l, q)).toThrow(/incompatible/);
    const dep = new Schema([struct("U", [field(1, "hp", ty(Kind.Int32), { deprecated: true })], { id: 1 })]);
    checkCompatible(l, dep);
    void NO_QUANT;
  });
});
