// Decode + apply of W1 ticks (testdata/vectors/w1-quantized-3ticks.json,
// class Qunit): the committed update ticks (10% of 100 entities move), and
// a synthetic update where all 100 move. Run with `npm run bench`.
import { bench, describe } from "vitest";
import { decodeDescriptor } from "../src/descriptor.js";
import { Replica } from "../src/replica.js";
import { loadVectors, unhex } from "../test/helpers.js";
import { seg } from "../test/seg.js";

const { v } = loadVectors().find((x) => x.file.startsWith("w1"))!;
const schema = decodeDescriptor(unhex(v.descriptor));
const r = new Replica(schema);
r.apply(...v.ticks[0]!.segments.map(unhex));
const t1 = v.ticks[1]!.segments.map(unhex);
const t2 = v.ticks[2]!.segments.map(unhex);
const q = schema.classNamed("Qunit")!;
const ents = r.entities();
const all = (sign: number): Uint8Array => {
  const g = seg().section(2, q.classId, 1).tree([{ id: 1, k: 5 }, { id: 2, k: 5 }, { id: 3, k: 4 }]).ids(ents.map((e) => e.slot), 0);
  for (let i = 0; i < ents.length; i++) g.s(sign * ((i % 13) - 6), 5).s(sign * ((i % 7) - 3), 5).s(sign * ((i % 5) - 2), 4);
  return g.end();
};
const a1 = all(1);
const a2 = all(-1);
const t0 = v.ticks[0]!.segments.map(unhex);

describe("W1, 100 Qunit entities", () => {
  let i = 0;
  bench("committed update tick (10% move, 1% hp)", () => {
    r.apply(...(i++ & 1 ? t2 : t1));
  });
  bench("all 100 move (x, y, angle)", () => {
    r.apply(i++ & 1 ? a2 : a1);
  });
  bench("create tick (full state of 100)", () => {
    new Replica(schema).apply(...t0);
  });
});
