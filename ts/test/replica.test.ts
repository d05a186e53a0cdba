// Replica behaviour: sections (§5.6), atomic ticks (§7.3), ownership
// (§5.1, §10.2), levels of detail (§5.8), schema evolution (§8) and
// callbacks with the Go client's semantics (client/callbacks.go).
import { describe, expect, test, vi } from "vitest";
import { decodeDescriptor, writeDescriptor } from "../src/descriptor.js";
import { dumpEntities } from "../src/dump.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { Replica, type BagEvent, type ListEvent, type MapEvent } from "../src/replica.js";
import { Kind, Schema } from "../src/schema.js";
import { BagC, ListC, MapC, Rec, elemValue, makeId } from "../src/state.js";
import { f32Bits } from "../src/values.js";
import { loadVectors, unhex } from "./helpers.js";
import { field, struct, ty } from "./schemas.js";
import { seg } from "./seg.js";

const CREATE = 1, UPDATE = 2, FILL = 4, SET = 5, RANKED = 6;

function heroSchema(): Schema {
  const vec = struct("Vec", [field(1, "x", ty(Kind.Float32)), field(2, "y", ty(Kind.Float32))]);
  return new Schema([
    struct("Hero", [
      field(1, "hp", ty(Kind.Int16)),
      field(2, "gold", ty(Kind.Uint32), { vis: 1 }),
      field(3, "mood", ty(Kind.Int8), { vis: 2 }),
      field(4, "name", ty(Kind.String)),
      field(5, "pos", ty(Kind.Nested, { struct: vec })),
      field(6, "old", ty(Kind.Int8), { deprecated: true }),
    ], { id: 1 }),
    struct("Rock", [field(1, "size", ty(Kind.Uint8))], { id: 2 }),
  ]);
}

function lodSchema(): Schema {
  return new Schema([
    struct("Mob", [
      field(1, "hp", ty(Kind.Int16)),
      field(2, "gear", ty(Kind.Uint8), { band: 1 }),
      field(3, "emote", ty(Kind.String), { band: 2 }),
    ], { id: 3, distances: [100, 10] }),
  ]);
}

/** Creates Hero slot `slot` (generation gen) with hp, name and pos.x. */
function createHero(slot: number, gen: number, hp: number, name: string, x: number): Uint8Array {
  return seg()
    .section(CREATE, 1, 1)
    .tree([{ id: 1, k: 4 }, { id: 4 }, { id: 5, sub: [{ id: 1 }] }])
    .ids([slot])
    .gens([gen])
    .s(hp, 4)
    .str(name)
    .bits(f32Bits(x), 32)
    .end();
}

function expectReject(fn: () => void, code: string): ReplicaDecodeError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ReplicaDecodeError);
    expect((e as ReplicaDecodeError).code).toBe(code);
    return e as ReplicaDecodeError;
  }
  throw new Error("accepted");
}

describe("sections and callbacks", () => {
  test("create reports onCreate then non-zero initial values; update old → new; set; destroy", () => {
    const r = new Replica(heroSchema());
    const log: unknown[] = [];
    r.onCreate("Hero", (e) => log.push(["create", e.id, e.get("hp")]));
    r.onField("Hero", "hp", (_e, o, n) => log.push(["hp", o, n]));
    r.onField("Hero", "name", (_e, o, n) => log.push(["name", o, n]));
    r.onField("Hero", "pos.x", (_e, o, n) => log.push(["pos.x", o, n]));
    r.onField(1, "mood", (_e, o, n) => log.push(["mood", o, n]));
    r.onDestroy("Hero", (e) => log.push(["destroy", e.id, e.get("hp")]));
    const id = makeId(3, 2);
    r.apply(createHero(3, 2, -5, "bob", 1.5));
    // Callbacks see the whole tick applied (hp already −5 in onCreate); mood stays 0: no event.
    expect(log).toEqual([["create", id, -5], ["hp", 0, -5], ["name", "", "bob"], ["pos.x", 0, 1.5]]);
    const e = r.entity(id)!;
    expect([e.get("hp"), e.get("name"), e.get("pos.x"), e.get("pos.y"), e.slot, e.generation]).toEqual([-5, "bob", 1.5, 0, 3, 2]);
    expect(r.entity(makeId(3, 1))).toBeUndefined(); // another generation names nothing

    log.length = 0;
    r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([3]).s(3, 3).end());
    expect(log).toEqual([["hp", -5, -2]]);

    log.length = 0;
    // set (§5.6): full mode, zero values included.
    r.apply(seg().section(SET, 1, 1).tree([{ id: 1, k: 2 }, { id: 4 }]).ids([3]).s(0, 2).str("").end());
    expect(log).toEqual([["hp", -2, 0], ["name", "bob", ""]]);

    log.length = 0;
    r.apply(seg().destroy([3]).end());
    expect(log).toEqual([["destroy", id, 0]]);
    expect(r.size).toBe(0);
  });

  test("a callback registered during dispatch runs from the next tick; unregistered ones stop at once", () => {
    const r = new Replica(heroSchema());
    const log: string[] = [];
    let cancelB: () => void = () => {};
    r.onField("Hero", "hp", () => {
      log.push("a");
      r.onField("Hero", "hp", () => log.push("late"));
      cancelB();
    });
    cancelB = r.onField("Hero", "hp", () => log.push("b"));
    r.apply(createHero(1, 0, 10, "x", 0));
    expect(log).toEqual(["a"]);
    log.length = 0;
    r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([1]).s(1, 3).end());
    expect(log).toEqual(["a", "late"]);
    expect(() => r.onField("Hero", "nope", () => {})).toThrow(/no leaf/);
    expect(() => r.onList("Hero", "hp", () => {})).toThrow(/wrong kind/);
    expect(() => r.onCreate("Nope", () => {})).toThrow(/no class Nope/);
  });

  test("a callback that throws stops no other: the tick applies, every error is reported, to onError or the console", () => {
    const r = new Replica(heroSchema());
    const log: unknown[] = [];
    r.onCreate("Hero", (e) => {
      if (e.slot === 1) throw new Error("create " + e.slot);
    });
    r.onCreate("Hero", (e) => log.push(["create", e.slot]));
    r.onField("Hero", "pos.x", () => {
      throw new Error("x");
    });
    r.onField("Hero", "hp", (e, _o, n) => log.push(["hp", e.slot, n]));
    const errors: unknown[] = [];
    r.onError = (err, where) => errors.push([(err as Error).message, where]);
    r.apply(createHero(1, 0, 10, "a", 1), createHero(2, 0, 20, "b", 2));
    expect(r.size).toBe(2);
    expect(log).toEqual([["create", 1], ["hp", 1, 10], ["create", 2], ["hp", 2, 20]]);
    expect(errors).toEqual([["create 1", "onCreate(Hero)"], ["x", "onField(Hero, pos.x)"], ["x", "onField(Hero, pos.x)"]]);
    // Without onError, each goes to console.error, named; the replica goes on.
    r.onError = undefined;
    const spy = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      r.apply(createHero(3, 0, 30, "c", 3));
      expect(spy.mock.calls.map((c) => [c[0], (c[1] as Error).message])).toEqual([["replica: callback onField(Hero, pos.x) threw:", "x"]]);
    } finally {
      spy.mockRestore();
    }
    expect(log.slice(4)).toEqual([["create", 3], ["hp", 3, 30]]);
    expect(r.entity(makeId(3, 0))!.get("pos.x")).toBe(3);
  });

  test("a rejected tick leaves the replica exactly as it was and runs no callback", () => {
    const r = new Replica(heroSchema());
    r.apply(createHero(1, 0, 10, "a", 1), createHero(2, 0, 20, "b", 2));
    const before = dumpEntities(r.entities());
    let calls = 0;
    r.onCreate("Hero", () => calls++);
    r.onDestroy("Hero", () => calls++);
    r.onField("Hero", "hp", () => calls++);
    const good = seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([1, 2]).s(1, 3).s(-1, 3).end();
    const bad = seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([7]).s(1, 3).end();
    const err = expectReject(() => r.applyTick([createHero(5, 1, 1, "c", 3), good, seg().destroy([2]).end(), bad]), "not-found");
    expect(err.segment).toBe(3);
    expect(dumpEntities(r.entities())).toBe(before);
    expect(r.size).toBe(2);
    expect(calls).toBe(0);
  });

  test("a rejected tick restores every numeric write, however many (the undo log grows)", () => {
    const r = new Replica(heroSchema());
    const slots = Array.from({ length: 600 }, (_, i) => i);
    r.apply(...slots.map((s) => createHero(s, 0, s, "x", 0)));
    const before = dumpEntities(r.entities());
    // 600 hp changes, then an update of a missing entity: all 600 are undone.
    const w = seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids(slots, 1);
    for (const _ of slots) w.s(-3, 3);
    const all = w.end();
    const bad = seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([700]).s(1, 3).end();
    expectReject(() => r.applyTick([all, bad]), "not-found");
    expect(dumpEntities(r.entities())).toBe(before);
    r.apply(all);
    expect(r.entity(makeId(599, 0))!.get("hp")).toBe(596);
  });

  test("malformed and inconsistent segments are rejected with their codes", () => {
    const r = new Replica(heroSchema());
    r.apply(createHero(1, 0, 10, "a", 1), seg().section(CREATE, 2, 1).tree([]).ids([2]).gens([0]).end());
    expectReject(() => r.apply(createHero(1, 3, 1, "again", 0)), "exists");
    expectReject(() => r.apply(seg().section(FILL, 1, 1).tree([{ id: 2, k: 4 }]).ids([1]).u(5, 4).end()), "not-found");
    expectReject(() => r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }]).ids([2]).s(1, 3).end()), "malformed");
    expectReject(() => r.apply(seg().section(SET, 2, 1).tree([]).ids([9]).end()), "not-found");
    expectReject(() => r.apply(seg().bits(7, 3).end()), "malformed");
    expectReject(() => r.apply(Uint8Array.of(0, 0)), "malformed");
    expectReject(() => r.apply(Uint8Array.of(0x08)), "malformed"); // non-zero padding
    expectReject(() => r.apply(seg().section(CREATE, 9, 0).end()), "unknown");
    expectReject(() => r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 6, k: 1 }]).ids([1]).u(0, 1).end()), "unknown");
    expectReject(() => r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 9 }]).ids([1]).end()), "unknown");
    // A full-mode value out of range: int16 from a U(k) code of 2^16.
    expectReject(() => r.apply(seg().section(SET, 1, 1).tree([{ id: 1, k: 20 }]).ids([1]).u(2 ** 16, 20).end()), "malformed");
    // A delta that does not fit 16 bits.
    expectReject(() => r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 20 }]).ids([1]).u(2 ** 16, 20).end()), "malformed");
    // A generation above 255.
    expectReject(() => r.apply(seg().section(CREATE, 2, 1).tree([]).ids([4]).gens([256], 9).end()), "malformed");
    // Slots must stay below 2^24.
    expectReject(() => r.apply(seg().section(CREATE, 2, 1).tree([]).ids([2 ** 24], 25).gens([0]).end()), "malformed");
    expect(r.size).toBe(2);
  });

  test("ranked updates name entities by rank among those held when the tick began (§5.4)", () => {
    const r = new Replica(heroSchema());
    r.apply(createHero(3, 0, 30, "c", 0), createHero(8, 0, 80, "h", 0), createHero(20, 0, 200, "t", 0));
    const hp = (slot: number) => r.entity(makeId(slot, 0))!.get("hp");
    // Ranks 0 and 2: slots 3 and 20.
    r.apply(seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([0, 2]).s(1, 3).s(-2, 3).end());
    expect([hp(3), hp(8), hp(20)]).toEqual([31, 80, 198]);
    // A create at slot 1 and a destroy of slot 3 in the same tick, before
    // the ranked update and in another segment: ranks 0, 1 and 2 still name
    // slots 3, 8 and 20.
    r.applyTick([
      createHero(1, 0, 10, "a", 0),
      seg().destroy([3]).end(),
      seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([1, 2]).s(2, 3).s(3, 3).end(),
    ]);
    expect([hp(1), hp(8), hp(20)]).toEqual([10, 82, 201]);
    expect(r.entity(makeId(3, 0))).toBeUndefined();
    // Next tick, the held set is slots 1, 8, 20: rank 0 is slot 1.
    r.apply(seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([0]).s(-1, 3).end());
    expect(hp(1)).toBe(9);
    // A rank beyond those held, and one naming an entity the tick destroyed.
    const before = dumpEntities(r.entities());
    expectReject(() => r.apply(seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([3]).s(1, 3).end()), "rank");
    expectReject(() => r.applyTick([seg().destroy([8]).end(), seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([1]).s(1, 3).end()]), "not-found");
    expect(dumpEntities(r.entities())).toBe(before);
    // A rolled-back tick leaves the held set as it was: rank 1 is slot 8.
    r.apply(seg().section(RANKED, 1, 1).tree([{ id: 1, k: 3 }], 0).ids([1]).s(1, 3).end());
    expect(hp(8)).toBe(83);
  });

  test("limits (§7.1)", () => {
    const r = new Replica(heroSchema(), { limits: { maxEntities: 2, maxStringBytes: 3, maxSegmentBytes: 64 } });
    expectReject(() => r.apply(seg().section(CREATE, 2, 1).tree([]).ids([1, 2, 3]).gens([0, 0, 0]).end()), "limit");
    expectReject(() => r.apply(createHero(1, 0, 1, "long", 0)), "limit");
    expectReject(() => r.apply(new Uint8Array(65)), "limit");
    r.apply(createHero(1, 0, 1, "abc", 0));
    expect(r.size).toBe(1);
  });

  test("nesting deeper than the JS stack is a typed rejection, even with a huge maxDepth", () => {
    const node = struct("Node", []);
    node.fields = [field(1, "kids", ty(Kind.List, { elem: ty(Kind.Nested, { struct: node }) }))];
    const s = new Schema([struct("Tree", [field(1, "root", ty(Kind.Nested, { struct: node }))], { id: 1 })]);
    const r = new Replica(s, { limits: { maxDepth: 2 ** 31 - 1, maxValues: 2 ** 31 - 1 } });
    const g = seg().section(CREATE, 1, 1).tree([{ id: 1, sub: [{ id: 1 }] }]).ids([0]).gens([0]);
    const depth = 200000;
    for (let i = 0; i < depth; i++) g.u(1, 4).tree([{ id: 1 }]); // a list of one element whose list ...
    g.u(0, 4);
    expect(expectReject(() => r.apply(g.end()), "limit").message).toMatch(/stack/);
    expect(r.size).toBe(0);
  });

  test("64-bit values and wrap-around deltas", () => {
    const s = new Schema([struct("W", [
      field(1, "i64", ty(Kind.Int64)),
      field(2, "u64", ty(Kind.Uint64)),
      field(3, "u8", ty(Kind.Uint8)),
      field(4, "f64", ty(Kind.Float64)),
    ], { id: 1 })]);
    const r = new Replica(s);
    const w = seg().section(CREATE, 1, 1).tree([{ id: 1, k: 63 }, { id: 2, k: 63 }, { id: 3, k: 8 }, { id: 4 }]).ids([0]).gens([0]);
    w.w.uBig(2n ** 64n - 1n, 63); // zigzag(−2^63)
    w.w.uBig(2n ** 64n - 1n, 63);
    w.u(250, 8);
    w.w.bitsWide(0, 0x3ff00000, 64); // 1.0
    r.apply(w.end());
    const e = r.entities()[0]!;
    expect([e.get("i64"), e.get("u64"), e.get("u8"), e.get("f64")]).toEqual([-(2n ** 63n), 2n ** 64n - 1n, 250, 1]);
    const u = seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 2 }, { id: 2, k: 2 }, { id: 3, k: 4 }, { id: 4, k: 60 }]).ids([0]);
    u.s(-1, 2).s(1, 2).s(10, 4); // i64 − 1 wraps to 2^63 − 1, u64 + 1 wraps to 0, u8 + 10 wraps to 4
    u.w.uBig(2n * 0x0010000000000000n, 60); // f64 bits + 2^52: 1.0 → 2.0
    r.apply(u.end());
    expect([e.get("i64"), e.get("u64"), e.get("u8"), e.get("f64")]).toEqual([2n ** 63n - 1n, 0n, 4, 2]);
  });
});

describe("ownership (§5.1, §10.2)", () => {
  test("gain resets others leaves and allows a fill; loss resets owner leaves", () => {
    const r = new Replica(heroSchema());
    const id = makeId(1, 0);
    const own: [number, boolean][] = [];
    r.onOwnership("Hero", (e, o) => own.push([e.id, o]));
    r.apply(createHero(1, 0, 10, "a", 1), seg().section(FILL, 1, 1).tree([{ id: 3, k: 4 }]).ids([1]).s(-3, 4).end());
    expect(r.entity(id)!.get("mood")).toBe(-3);
    r.applyTick([seg().section(FILL, 1, 1).tree([{ id: 2, k: 8 }]).ids([1]).u(99, 8).end()], { gained: [id] });
    const e = r.entity(id)!;
    expect([e.owned, e.get("mood"), e.get("gold")]).toEqual([true, 0, 99]);
    expect(r.owned().map((x) => x.id)).toEqual([id]);
    r.applyTick([seg().section(FILL, 1, 1).tree([{ id: 3, k: 4 }]).ids([1]).s(4, 4).end()], { lost: [id] });
    expect([e.owned, e.get("mood"), e.get("gold")]).toEqual([false, 4, 0]);
    expect(own).toEqual([[id, true], [id, false]]);
  });

  test("an entity gained in the tick that creates it", () => {
    const r = new Replica(heroSchema());
    const id = makeId(4, 1);
    r.applyTick([createHero(4, 1, 5, "n", 0)], { gained: [id] });
    expect(r.entity(id)!.owned).toBe(true);
  });

  test("contradictory changes reject the tick", () => {
    const r = new Replica(heroSchema());
    const id = makeId(1, 0);
    r.applyTick([createHero(1, 0, 10, "a", 1)], { gained: [id] });
    const before = dumpEntities(r.entities());
    expect(expectReject(() => r.applyTick([], { gained: [id] }), "ownership").segment).toBe(-1);
    expectReject(() => r.applyTick([], { lost: [makeId(2, 0)] }), "ownership");
    expectReject(() => r.applyTick([], { gained: [makeId(7, 0)] }), "ownership");
    expectReject(() => r.applyTick([], { lost: [id, id] }), "ownership");
    expect(dumpEntities(r.entities())).toBe(before);
  });
});

describe("levels of detail (§3.6, §5.8)", () => {
  const createMob = (slot: number, bands: boolean) => {
    const tree = bands ? [{ id: 1, k: 8 }, { id: 2, k: 8 }, { id: 3 }] : [{ id: 1, k: 8 }];
    const s = seg().section(CREATE, 3, 1).tree(tree).ids([slot]).gens([0]).s(50, 8);
    if (bands) s.u(7, 8).str("wave");
    return s.end();
  };

  test("created at the top level; lowering forgets bands, raising allows fills", () => {
    const r = new Replica(lodSchema());
    const id = makeId(1, 0);
    r.apply(createMob(1, true));
    const e = r.entity(id)!;
    expect([e.level, e.knows("emote"), e.get("emote")]).toEqual([2, true, "wave"]);
    r.applyTick([], { levels: [{ id, level: 0 }] });
    expect([e.level, e.knows("gear"), e.knows("hp"), e.get("gear"), e.get("emote"), e.get("hp")]).toEqual([0, false, true, 0, "", 50]);
    // A fill without a level change is refused; with one, accepted.
    const fill = seg().section(FILL, 3, 1).tree([{ id: 2, k: 8 }]).ids([1]).u(9, 8).end();
    expectReject(() => r.apply(fill), "not-found");
    r.applyTick([fill], { levels: [{ id, level: 1 }] });
    expect([e.level, e.get("gear"), e.knows("gear"), e.knows("emote")]).toEqual([1, 9, true, false]);
  });

  test("onLevel reports level changes after the tick, as the Go client's OnLevel", () => {
    const r = new Replica(lodSchema());
    const id = makeId(1, 0);
    r.apply(createMob(1, true));
    const got: string[] = [];
    r.onLevel(3, (e, old, now) => got.push(`${e.id}:${old}->${now} emote=${String(e.get("emote"))}`));
    r.applyTick([], { levels: [{ id, level: 0 }] });
    // A rejected tick reports nothing.
    expectReject(() => r.applyTick([], { levels: [{ id, level: 3 }] }), "level");
    const fill = seg().section(FILL, 3, 1).tree([{ id: 3 }]).ids([1]).str("bow").end();
    r.applyTick([fill], { levels: [{ id, level: 2 }] });
    r.applyTick([], { levels: [{ id, level: 2 }] }); // no change: no callback
    // An entity created at a lower level reports the change from every band.
    r.applyTick([createMob(2, false)], { levels: [{ id: makeId(2, 0), level: 1 }] });
    expect(got).toEqual([`${id}:2->0 emote=`, `${id}:0->2 emote=bow`, `${makeId(2, 0)}:2->1 emote=`]);
  });

  test("an entry for an entity the tick creates applies after the segments", () => {
    const r = new Replica(lodSchema());
    const id = makeId(2, 0);
    r.applyTick([createMob(2, false)], { levels: [{ id, level: 1 }] });
    expect(r.entity(id)!.level).toBe(1);
  });

  test("bad entries reject the tick", () => {
    const r = new Replica(lodSchema());
    const id = makeId(1, 0);
    r.apply(createMob(1, true));
    const before = dumpEntities(r.entities());
    expectReject(() => r.applyTick([], { levels: [{ id, level: 3 }] }), "level");
    expectReject(() => r.applyTick([], { levels: [{ id, level: 1 }, { id, level: 0 }] }), "level");
    expectReject(() => r.applyTick([], { levels: [{ id: makeId(9, 0), level: 1 }] }), "level");
    expectReject(() => r.applyTick([createMob(3, false)], { levels: [{ id: makeId(3, 0), level: 5 }] }), "level");
    expect(dumpEntities(r.entities())).toBe(before);
    const plain = new Replica(heroSchema());
    plain.apply(createHero(1, 0, 1, "a", 0));
    expect([plain.entity(id)!.level, plain.entity(id)!.knows("hp"), plain.entity(id)!.knows("pos.x"), plain.entity(id)!.knows("pos")]).toEqual([0, true, true, true]);
    for (const bad of ["nosuch", "pos.z", "po", ""]) expect(() => plain.entity(id)!.knows(bad)).toThrow(`has no field "${bad}"`);
    // get throws as knows does: a misspelt path is a bug, not a value (a nested struct has no one value).
    for (const bad of ["hpp", "pos.z", "pos", ""]) expect(() => plain.entity(id)!.get(bad)).toThrow(`replica: Hero has no leaf "${bad}"`);
    expectReject(() => plain.applyTick([], { levels: [{ id, level: 1 }] }), "level");
  });
});

describe("schema evolution (§8)", () => {
  test("unknown fields are skipped, missing ones stay zero, unknown classes keep the sender's layout", () => {
    const local = new Schema([struct("Hero", [field(1, "hp", ty(Kind.Int16)), field(4, "name", ty(Kind.String)), field(9, "extra", ty(Kind.Uint8))], { id: 1 })]);
    const remote = decodeDescriptor(writeDescriptor(heroSchema()));
    const r = new Replica(local, { remote });
    const rock = seg().section(CREATE, 2, 1).tree([{ id: 1, k: 8 }]).ids([2]).gens([0]).u(77, 8).end();
    r.apply(createHero(1, 0, -7, "z", 2.5), rock);
    const h = r.entity(makeId(1, 0))!;
    expect([h.type.name, h.get("hp"), h.get("name"), h.get("extra")]).toEqual(["Hero", -7, "z", 0]);
    expect(() => h.get("pos.x")).toThrow(/no leaf/); // the sender's, not the local class's
    r.apply(seg().section(UPDATE, 1, 1).tree([{ id: 1, k: 3 }, { id: 5, sub: [{ id: 1, k: 30 }] }]).ids([1]).s(2, 3).u(5, 30).end());
    expect(h.get("hp")).toBe(-5);
    expect(r.entity(makeId(2, 0))!.get("size")).toBe(77);
    const incompatible = new Schema([struct("Hero", [field(1, "hp", ty(Kind.Int32))], { id: 1 })]);
    expectReject(() => new Replica(incompatible, { remote }), "incompatible");
  });
});

describe("container callbacks (containers.json)", () => {
  test("replaying the item events of each tick on the old containers gives the new ones", () => {
    const v = loadVectors().find((x) => x.file === "containers.json")!.v;
    const schema = decodeDescriptor(unhex(v.descriptor));
    const r = new Replica(schema);
    const cls = schema.classes[0]!;
    const shadow = new Map<string, unknown>();
    const key = (id: number, leaf: string) => `${id}/${leaf}`;
    let counts = { list: 0, map: 0, bag: 0 };
    for (const l of cls.leaves) {
      const k = l.field.type.kind;
      if (k === Kind.List) {
        r.onList(cls, l.name, (e, ev: ListEvent) => {
          counts.list++;
          const a = (shadow.get(key(e.id, l.name)) as unknown[] | undefined) ?? [];
          if (ev.kind === "added") a.splice(ev.index, 0, ev.new);
          else if (ev.kind === "removed") a.splice(ev.index, 1);
          else a[ev.index] = ev.new;
          shadow.set(key(e.id, l.name), a);
        });
      } else if (k === Kind.Map) {
        r.onMap(cls, l.name, (e, ev: MapEvent) => {
          counts.map++;
          const m = (shadow.get(key(e.id, l.name)) as Map<unknown, unknown> | undefined) ?? new Map();
          if (ev.kind === "removed") m.delete(ev.key);
          else m.set(ev.key, ev.new);
          shadow.set(key(e.id, l.name), m);
        });
      } else if (k === Kind.Bag) {
        r.onBag(cls, l.name, (e, ev: BagEvent) => {
          counts.bag++;
          const m = (shadow.get(key(e.id, l.name)) as Map<unknown, unknown> | undefined) ?? new Map();
          if (ev.kind === "removed") m.delete(ev.key);
          else if (ev.itemLeaf < 0) m.set(ev.key, (ev.new as Rec).clone());
          else m.set(ev.key, ev.item!.clone());
          shadow.set(key(e.id, l.name), m);
        });
      }
    }
    for (const tk of v.ticks) {
      r.apply(...tk.segments.map(unhex));
      for (const e of r.entities()) {
        for (const l of cls.leaves) {
          const c = e.obj[l.obj];
          const sh = shadow.get(key(e.id, l.name));
          if (c instanceof ListC) expect(JSON.stringify(sh ?? [], big)).toBe(JSON.stringify(c.values(), big));
          if (c instanceof MapC && !(c instanceof BagC)) {
            const m = (sh as Map<unknown, unknown>) ?? new Map();
            expect(m.size).toBe(c.size);
            for (const k2 of c.keys()) expect(JSON.stringify(m.get(k2), big)).toBe(JSON.stringify(elemValue(l.field.type.elem!, c.get(k2)!), big));
          }
          if (c instanceof BagC) {
            const m = (sh as Map<unknown, Rec>) ?? new Map();
            expect(m.size).toBe(c.size);
            for (const k2 of c.keys()) expect(m.get(k2)!.equals(c.get(k2)!)).toBe(true);
          }
        }
      }
    }
    expect(counts.list).toBeGreaterThan(10);
    expect(counts.map).toBeGreaterThan(5);
    expect(counts.bag).toBeGreaterThan(5);
  });
});

const big = (_: string, v: unknown): unknown => (typeof v === "bigint" ? v.toString() : v instanceof Rec ? dumpEntitiesRec(v) : v);
const dumpEntitiesRec = (r: Rec): string => Array.from(r.num).join(",") + "|" + JSON.stringify(r.obj, big);
