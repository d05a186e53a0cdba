// The RPC stubs replicagen -ts generates, on the golden fixture of package
// gen (gen/testdata/golden/golden_replica.ts, checked fresh by
// gen.TestGenerateTSGolden): client RPCs encode their typed arguments as
// Connection.callRPC records that decode back to them, and server RPC
// registrations pass typed arguments read from the decoded record.
import { describe, expect, test } from "vitest";
import type { Connection } from "../src/connection.js";
import { encodeRecord } from "../src/encoder.js";
import { Replica } from "../src/replica.js";
import type { Entity, Rec } from "../src/state.js";
import { makeId } from "../src/state.js";
import { Fire, Hero, Hit, schema } from "../../gen/testdata/golden/golden_replica.js";
import { seg } from "./seg.js";

/** A Connection that records callRPC calls and keeps handleRPC handlers. */
function fakeConn() {
  const calls: { e: Entity; rpc: number; args: Record<string, unknown> }[] = [];
  const handlers = new Map<number, (e: Entity, args: Rec) => void>();
  const conn = {
    callRPC: (e: Entity, rpc: number, args: Record<string, unknown>) => calls.push({ e, rpc, args }),
    handleRPC: (_c: unknown, rpc: number, h: (e: Entity, args: Rec) => void) => {
      handlers.set(rpc, h);
      return () => handlers.delete(rpc);
    },
  } as unknown as Connection;
  return { conn, calls, handlers };
}

function heroReplica(): { r: Replica; hero: Hero } {
  const r = new Replica(schema);
  r.apply(seg().section(1, Hero.classId, 1).tree([]).ids([1]).gens([0]).end());
  return { r, hero: Hero.of(r.entity(makeId(1, 0)))! };
}

describe("generated RPC stubs (gen/testdata/golden)", () => {
  test("a client RPC with positional arguments", () => {
    const { r, hero } = heroReplica();
    const { conn, calls } = fakeConn();
    hero.fire(conn, 1.5, -2.25, 3, "bow", 77);
    expect(calls.length).toBe(1);
    const { e, rpc, args } = calls[0]!;
    const def = Hero.cls.rpc(rpc)!;
    expect([e, def.name, def.dir]).toEqual([hero.entity, "fire", 0]);
    // The record decodes back, through the generated view, to the arguments.
    const rec = r.decoder.decodeRecord(def.args, def.args, encodeRecord(def.args, args));
    const f = new Fire(rec);
    expect([f.x, f.y, f.weapon, f.label, f.target]).toEqual([1.5, -2.25, 3, "bow", 77]);
  });

  test("a client RPC with an argument object", () => {
    const { hero } = heroReplica();
    const { conn, calls } = fakeConn();
    hero.aim(conn, { power: 0.5, tags: ["a"] });
    expect(calls.map((c) => [Hero.cls.rpc(c.rpc)!.name, c.args])).toEqual([["aim", { power: 0.5, tags: ["a"] }]]);
  });

  test("server RPCs pass the entity's view and typed arguments", () => {
    const { r, hero } = heroReplica();
    const { conn, handlers } = fakeConn();
    const got: unknown[] = [];
    const off = Hero.onHit(conn, (h, damage, from, fx) => got.push([h.entity.id, damage, from, [...fx]]));
    Hero.onTaunt(conn, (h) => got.push(["taunt", h.entity.id]));
    const hit = Hero.cls.rpc(5)!;
    expect(hit.name).toBe("hit");
    const rec = r.decoder.decodeRecord(hit.args, hit.args, encodeRecord(hit.args, { damage: -40, from: 9, fx: new Uint8Array([1, 2]) }));
    expect(new Hit(rec).damage).toBe(-40);
    handlers.get(5)!(hero.entity, rec);
    const taunt = Hero.cls.rpcs.find((x) => x.name === "taunt")!;
    handlers.get(taunt.id)!(hero.entity, r.decoder.decodeRecord(taunt.args, taunt.args, encodeRecord(taunt.args, {})));
    expect(got).toEqual([[hero.entity.id, -40, 9, [1, 2]], ["taunt", hero.entity.id]]);
    off();
    expect(handlers.has(5)).toBe(false);
  });
});
