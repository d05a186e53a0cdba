// Many replicas in one process (a Node bot farm): each round builds n
// fresh Replicas and applies the W1 full state of
// testdata/vectors/w1-quantized-3ticks.json (tick 1, 100 Qunit entities)
// to each, then the vector's two update ticks to each, alternately, u
// times (vector: another file of that form, e.g. W1 with more entities).
// It prints the median over the rounds after the warm-up of the
// time per full state (construction included) and per update tick.
//
//   node bench/replicas.mjs [bundle] [rounds] [n] [u] [vector]
//
// bundle is an ES module exporting Replica and decodeDescriptor (default
// ../internal/tsnode/runtime.min.js, the minified runtime go generate
// builds); give another revision's, e.g. from `git show
// REV:internal/tsnode/runtime.min.js > /tmp/rt.mjs`, to compare. Wall
// times are noisy on a shared machine; for instruction counts run it
// under `valgrind --tool=callgrind` with two round counts and divide the
// difference. n = 1 (one fresh replica per round, dropped after it) is
// where a Replica whose methods were closures per instance cost twice
// what a class does.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const dir = path.dirname(fileURLToPath(import.meta.url));
const [bundle = path.join(dir, "../../internal/tsnode/runtime.min.js"), rounds = "30", n = "200", u = "10", vector] = process.argv.slice(2);
const { Replica, decodeDescriptor } = await import(pathToFileURL(path.resolve(bundle)).href);

const v = JSON.parse(readFileSync(vector ?? path.join(dir, "../../testdata/vectors/w1-quantized-3ticks.json"), "utf8"));
const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const schema = decodeDescriptor(unhex(v.descriptor));
const [full, t1, t2] = v.ticks.map((t) => t.segments.map(unhex));

const warm = 5;
const fullNs = [];
const tickNs = [];
for (let r = 0; r < warm + +rounds; r++) {
  let t0 = process.hrtime.bigint();
  const reps = [];
  for (let i = 0; i < +n; i++) {
    const rep = new Replica(schema);
    rep.applyTick(full);
    reps.push(rep);
  }
  const t = process.hrtime.bigint();
  for (let j = 0; j < +u; j++) for (const rep of reps) rep.applyTick(j & 1 ? t2 : t1);
  if (r >= warm) {
    fullNs.push(Number(t - t0) / +n);
    tickNs.push(Number(process.hrtime.bigint() - t) / (+n * +u));
  }
  if (reps[+n - 1].size !== v.ticks[0].state.length) throw new Error("wrong state");
}
const median = (xs) => (xs.length ? xs.sort((a, b) => a - b)[xs.length >> 1] : NaN);
console.log(
  JSON.stringify({ bundle: path.basename(bundle), n: +n, rounds: +rounds, full_state_us: +(median(fullNs) / 1e3).toFixed(2), update_tick_us: +(median(tickNs) / 1e3).toFixed(2) }),
);
