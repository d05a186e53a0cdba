// The classes replicagen -ts generates, for internal/testschema/v1
// (v1_replica.ts), driven with bytes the Go encoder produced
// (testdata/generated-v1.json, written by internal/crosslang's TestFixture):
// typed getters, nested views, typed containers and typed callbacks. The
// type check (npm test runs tsc first) checks the generated file too.
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { Replica } from "../src/replica.js";
import { Hero, Item, Missile, schema } from "../../internal/testschema/v1/v1_replica.js";
import * as v2 from "../../internal/testschema/v2/v2_replica.js";
import * as arena from "../../internal/arena/arena_replica.js";
import { unhex } from "./helpers.js";

interface Fixture {
  hero: number;
  missile: number;
  ticks: { gained: number[]; segments: string[] }[];
}

const fx = JSON.parse(readFileSync(new URL("./testdata/generated-v1.json", import.meta.url), "utf8")) as Fixture;
const apply = (r: Replica, i: number): void => {
  const t = fx.ticks[i]!;
  r.applyTick(t.segments.map(unhex), { gained: t.gained });
};

describe("generated TypeScript classes (internal/testschema/v1)", () => {
  test("the embedded schema has the package's classes", () => {
    expect(schema.classes.map((c) => [c.name, c.classId])).toEqual([["Hero", 1], ["Missile", 2]]);
    expect([Hero.classId, Missile.classId]).toEqual([1, 2]);
  });

  test("every generated module loads: its leaf references match its embedded descriptor", () => {
    // Loading checks each leaf a getter reads (leafRef, nestedAt); a
    // mismatch throws at import.
    expect(v2.schema.classes.map((c) => c.name)).toEqual(["Hero", "Missile", "Beacon"]);
    expect(v2.Beacon.classId).toBe(v2.schema.classNamed("Beacon")!.classId);
    expect(arena.schema.classes.map((c) => c.name).sort()).toEqual(["Qunit", "Unit"]);
  });

  test("typed getters, nested views and containers read Go's values", () => {
    const r = new Replica(schema);
    apply(r, 0);
    const h = Hero.of(r.entity(fx.hero))!;
    const m = Missile.of(r.entity(fx.missile))!;
    expect(h).toBeInstanceOf(Hero);
    expect(Hero.of(r.entity(fx.missile))).toBeUndefined();
    expect(Hero.all(r).map((x) => x.entity.id)).toEqual([fx.hero]);
    expect([h.alive, h.i16, h.u64, h.name, h.target, h.entity.owned, h.owned]).toEqual([true, -300, 1n << 40n, "ann", fx.missile, true, true]);
    expect(h.body.pos.x).toBe(1.5);
    expect([...h.scores]).toEqual([1, -2]);
    expect([h.scores.length, h.scores.at(1), h.scores.at(2)]).toEqual([2, -2, undefined]);
    expect([...h.cds]).toEqual([["fire", 0.5]]);
    const it = h.inv.get(7)!;
    expect(it).toBeInstanceOf(Item);
    expect([h.inv.size, h.inv.keys(), it.count, it.kind, it.pos.z]).toEqual([1, [7], 3, 0, 0]);
    expect([m.ttl, m.shooter, m.entity.owned, m.owned, m.pos.y, m.pos.x]).toEqual([10, fx.hero, false, false, 2.5, 0]);
    // Nested structs at offsets, elements and map values as views.
    expect([h.qb, h.body.stats.str, h.body.stats.resist.fire, h.body.stats.dex, h.body.mark]).toEqual([-12.25, -7, 9, 0, 0]);
    expect([h.buffs.length, h.buffs.at(0)!.kind, h.buffs.at(0)!.until]).toEqual([1, 3, 0n]);
    expect([h.stash.keys(), h.stash.get(-2)!.count, h.stash.get(2)]).toEqual([[-2], 8, undefined]);
  });

  test("typed callbacks get typed views and values", () => {
    const r = new Replica(schema);
    const log: string[] = [];
    Hero.onCreate(r, (h) => log.push(`create hero ${h.name}`));
    Missile.onDestroy(r, (m) => log.push(`destroy missile ttl=${m.ttl}`));
    Hero.onOwnership(r, (h, owned) => log.push(`owned ${h.entity.id} ${owned}`));
    Hero.onI16Change(r, (_h, old, now) => log.push(`i16 ${old} -> ${now}`));
    Hero.onBodyPosXChange(r, (h, old, now) => log.push(`pos.x ${old} -> ${now} (${h.body.pos.x})`));
    Hero.onScoresChange(r, (_h, ev) => log.push(`scores ${ev.kind} [${ev.index}] ${ev.old} -> ${ev.new}`));
    const off = Hero.onInvChange(r, (_h, ev) => {
      const show = (v: unknown): string => (v instanceof Item ? `Item(count=${v.count})` : String(v));
      log.push(`inv ${ev.kind} ${ev.key} leaf=${ev.itemLeaf} ${show(ev.old)} -> ${show(ev.new)}, now ${show(ev.item)}`);
    });
    apply(r, 0);
    apply(r, 1);
    off();
    // Events come in the order of the segments (all, others, owner):
    // i16 and inv are owner-only. The encoder resends the small item
    // whole rather than as a field operation.
    expect(log).toEqual([
      "create hero ann",
      "pos.x 0 -> 1.5 (1.5)",
      "scores added [0] undefined -> 1",
      "scores added [1] undefined -> -2",
      "i16 0 -> -300",
      "inv added 7 leaf=-1 undefined -> Item(count=3), now Item(count=3)",
      "owned 1 true",
      "scores added [2] undefined -> 4",
      "destroy missile ttl=10",
      "i16 -300 -> 5",
      "inv changed 7 leaf=-1 Item(count=3) -> Item(count=4), now Item(count=4)",
    ]);
  });
});
