// Standalone records (§6.1) as client RPC arguments: encodeRecord then the
// decoder's decodeRecord gives the values back.
import { describe, expect, test } from "vitest";
import { decoder } from "../src/decoder.js";
import { encodeRecord } from "../src/encoder.js";
import { Kind, Schema } from "../src/schema.js";
import { BagC, ListC, MapC, Rec } from "../src/state.js";
import { field, quant, struct, ty } from "./schemas.js";
import { BitReader } from "../src/bits.js";

function argsSchema() {
  const vec = struct("Vec", [field(1, "x", ty(Kind.Float32, { quant: quant({ mode: 2, step: 0.5, min: -10, nbits: 6 }) })), field(2, "y", ty(Kind.Float64))]);
  const item = struct("Item", [field(1, "n", ty(Kind.Uint16)), field(2, "tag", ty(Kind.String))]);
  const args = struct("Args", [
    field(1, "b", ty(Kind.Bool)),
    field(2, "i8", ty(Kind.Int8)),
    field(3, "i64", ty(Kind.Int64)),
    field(4, "u64", ty(Kind.Uint64)),
    field(5, "f32", ty(Kind.Float32)),
    field(6, "q", ty(Kind.Float64, { quant: quant({ mode: 1, step: 0.25 }) })),
    field(7, "s", ty(Kind.String)),
    field(8, "bin", ty(Kind.Bytes)),
    field(9, "at", ty(Kind.Nested, { struct: vec })),
    field(10, "nums", ty(Kind.List, { elem: ty(Kind.Int32) })),
    field(11, "pts", ty(Kind.List, { elem: ty(Kind.Nested, { struct: vec }) })),
    field(12, "m", ty(Kind.Map, { key: Kind.Int16, elem: ty(Kind.String) })),
    field(13, "sm", ty(Kind.Map, { key: Kind.String, elem: ty(Kind.Uint8) })),
    field(14, "bag", ty(Kind.Bag, { key: Kind.Uint32, struct: item })),
    field(15, "who", ty(Kind.Ref)),
  ]);
  const cls = struct("C", [field(1, "hp", ty(Kind.Int16))], { id: 1 });
  cls.rpcs = [{ id: 1, name: "go", dir: 0, args }];
  return { schema: new Schema([cls]), args };
}

describe("encodeRecord", () => {
  test("round trips through decodeRecord", () => {
    const { schema, args } = argsSchema();
    const v = {
      b: true, i8: -128, i64: -(2n ** 63n), u64: 2n ** 64n - 1n, f32: 1.1, q: -2.6, s: "héllo", bin: Uint8Array.of(0, 255),
      at: { x: 3.2, y: -0 }, nums: [1, -2, 2 ** 31 - 1, -(2 ** 31)], pts: [{ x: -10, y: 1 }, { x: 100 }],
      m: { "-5": "neg", 7: "seven", 300: "" }, sm: new Map([["b", 2], ["a", 1], ["é", 3]]),
      bag: { 10: { n: 1, tag: "x" }, 2: { n: 2 } }, who: 0x01000005,
    };
    const rec = decoder(schema).decodeRecord(args, args, encodeRecord(args, v));
    const g = (n: string) => rec.get(n);
    expect([g("b"), g("i8"), g("i64"), g("u64"), g("f32"), g("q"), g("s"), g("bin"), g("at.x"), g("at.y"), g("who")]).toEqual([
      true, -128, -(2n ** 63n), 2n ** 64n - 1n, Math.fround(1.1), -2.5, "héllo", Uint8Array.of(0, 255), 3, -0, 0x01000005,
    ]);
    expect(Object.is(g("at.y"), -0)).toBe(true);
    expect((g("nums") as ListC).values()).toEqual([1, -2, 2 ** 31 - 1, -(2 ** 31)]);
    const pts = (g("pts") as ListC).items as Rec[];
    expect(pts.map((p) => [p.get("x"), p.get("y")])).toEqual([[-10, 1], [21.5, 0]]); // 100 clamps to the top code
    const m = g("m") as MapC;
    expect(m.keys()).toEqual([-5, 7, 300]);
    expect(m.get(300)).toBe("");
    expect((g("sm") as MapC).keys()).toEqual(["a", "b", "é"]);
    const bag = g("bag") as BagC;
    expect(bag.keys()).toEqual([2, 10]);
    expect([bag.get(10)!.get("tag"), bag.get(2)!.get("n")]).toEqual(["x", 2]);
  });

  test("zero values are left out of the tree; the empty record is one field count", () => {
    const { args } = argsSchema();
    const r = new BitReader(encodeRecord(args, { b: false, s: "", nums: [] }));
    expect(r.u(2)).toBe(0);
    r.finish();
    expect(() => encodeRecord(args, { i8: 200 })).toThrow(RangeError);
    expect(() => encodeRecord(args, { i8: 1.5 })).toThrow(RangeError);
  });

  test("a value of the wrong JS type throws, naming the struct and the field; absent and undefined fields are zero; NaN and ±Inf floats pass", () => {
    const { schema, args } = argsSchema();
    const bad: [Record<string, unknown>, string][] = [
      [{ f32: "50" }, 'Args.f32: expected number, got "50"'],
      [{ i8: null }, "Args.i8: expected number, got null"],
      [{ i8: 5n }, "Args.i8: expected number, got 5n"],
      [{ who: true }, "Args.who: expected number, got true"],
      [{ i64: "1" }, 'Args.i64: expected number or bigint, got "1"'],
      [{ b: 1 }, "Args.b: expected boolean, got 1"],
      [{ s: 7 }, "Args.s: expected string, got 7"],
      [{ bin: "ab" }, 'Args.bin: expected Uint8Array, got "ab"'],
      [{ at: 3 }, "Args.at: expected object, got 3"],
      [{ at: { x: "1" } }, 'Args.at.x: expected number, got "1"'],
      [{ nums: [1, "2"] }, 'Args.nums[1]: expected number, got "2"'],
      [{ nums: { 0: 1 } }, "Args.nums: expected array, got object"],
      [{ pts: [{}, { y: [] }] }, "Args.pts[1].y: expected number, got array"],
      [{ m: { 5: 9 } }, "Args.m[5]: expected string, got 9"],
      [{ bag: { 3: { n: "1" } } }, 'Args.bag[3].n: expected number, got "1"'],
      [{ bag: [] }, "Args.bag: expected Map or object, got array"],
    ];
    for (const [v, msg] of bad) expect(() => encodeRecord(args, v), msg).toThrow(new TypeError("replica: " + msg));
    expect(() => encodeRecord(args, { nums: [1, 1.5] })).toThrow(new RangeError("replica: Args.nums[1]: 1.5 is not an integer of 32 bits"));
    const rec = decoder(schema).decodeRecord(args, args, encodeRecord(args, { f32: NaN, q: Infinity, at: { y: -Infinity }, s: undefined }));
    expect([rec.get("f32"), rec.get("at.y"), rec.get("i8"), rec.get("s")]).toEqual([NaN, -Infinity, 0, ""]);
  });
});
