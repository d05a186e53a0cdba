// Generates golden.txt for the Go port of workload W2 from the JavaScript
// reference generator. Usage (from this directory):
//
//	node gen_golden.mjs ../../../../../shared/workloads/w2.mjs > golden.txt
//
// The argument is the path to w2.mjs (resolved against the current directory).
//
// Line format (space separated, see w2_test.go):
//
//	tick <n> <fnv>                 state hash after tick n
//	moved <n> <id> ...             ids sample(moveN) drew in step n
//	hp <n> <id> ...                ids sample(hpN) drew in step n
//	inv <n> <player>:<key> ...     inventory items whose count step n set
//	gold <n> <id> ...              players psample(goldN) drew in step n
//	armor <n> <id> ...             players psample(gearN) drew in step n
//	emote <n> <id> ...             players psample(emoteN) drew in step n
//	view <c> <nvis> <nnear> <fnv>  client c after the last tick: how many
//	                               entities it sees, how many players' near
//	                               fields among them, and the hash of both lists
//	stats <vis> <near> <samples>   the totals behind w2.mjs's printed
//	                               visible_per_client and near_players_per_client
//
// The state <fnv> is FNV-1a 64 (16 lower-case hex digits) over, in this
// order and each in id order, little-endian: x, y, angle (float32 bit
// patterns, 4 bytes), hp (int16, 2 bytes), level (uint8), gold (int32),
// helm, armor, weapon (uint16 each, in that order for each player), emote
// (uint8), then for each player for key 1..invSize: kind (uint16) and count
// (int16). The view <fnv> is FNV-1a 64 over the visible ids and then the near
// ids, each as a little-endian uint32, both in increasing id order.
//
// The stats line repeats the sampling of the reference's main block: after
// loop index t = 20, 40, ..., 200 (that is after ticks 21, 41, ..., 201), for
// clients 0, 10, ..., 490.
import path from "node:path";
import { pathToFileURL } from "node:url";

const ref = process.argv[2];
if (!ref) {
  console.error("usage: node gen_golden.mjs <path/to/w2.mjs>");
  process.exit(2);
}
const { Zone } = await import(pathToFileURL(path.resolve(ref)).href);

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = (1n << 64n) - 1n;

class FNV {
  constructor() { this.h = FNV_OFFSET; }
  byte(b) { this.h = ((this.h ^ BigInt(b & 0xff)) * FNV_PRIME) & MASK; }
  u8(v) { this.byte(v); }
  u16(v) { this.byte(v); this.byte(v >>> 8); }
  u32(v) { this.byte(v); this.byte(v >>> 8); this.byte(v >>> 16); this.byte(v >>> 24); }
  hex() { return this.h.toString(16).padStart(16, "0"); }
}

function hashState(z) {
  const h = new FNV();
  // Bit patterns via unsigned views of the same buffers (endianness-independent).
  for (const a of [z.x, z.y, z.angle]) {
    const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
    for (let i = 0; i < u.length; i++) h.u32(u[i]);
  }
  for (let i = 0; i < z.N; i++) h.u16(z.hp[i] & 0xffff);
  for (let i = 0; i < z.N; i++) h.u8(z.level[i]);
  for (let p = 0; p < z.P; p++) h.u32(z.gold[p] >>> 0);
  for (let p = 0; p < z.P; p++) { h.u16(z.helm[p]); h.u16(z.armor[p]); h.u16(z.weapon[p]); }
  for (let p = 0; p < z.P; p++) h.u8(z.emote[p]);
  for (let p = 0; p < z.P; p++) {
    for (let k = 1; k <= z.invSize; k++) {
      const it = z.inv[p].get(k);
      h.u16(it.kind & 0xffff); h.u16(it.count & 0xffff);
    }
  }
  return h.hex();
}

const z = new Zone();

// Record what each step touches: the samples it draws, in order, and the
// inventory items it looks up (step's only use of Map.get).
let samples = [], invTouched = [];
for (const m of ["sample", "psample"]) {
  const f = Zone.prototype[m];
  z[m] = (k) => { const out = f.call(z, k); samples.push(out); return out; };
}
z.inv.forEach((m, p) => {
  const get = m.get.bind(m);
  m.get = (k) => { invTouched.push(`${p}:${k}`); return get(k); };
});

const out = [`tick 0 ${hashState(z)}`];
const hashTicks = new Set([1, 2, 10, 20, 100, 220]);
const changeTicks = new Set([1, 220]);
let vis = 0, nearN = 0, nSamples = 0;
for (let t = 0; t < 220; t++) {
  samples = []; invTouched = [];
  z.step();
  const n = z.tick;
  if (samples.length !== 6) throw new Error(`step ${n} drew ${samples.length} samples`);
  if (changeTicks.has(n)) {
    ["moved", "hp"].forEach((kind, i) => out.push(`${kind} ${n} ${samples[i].join(" ")}`));
    out.push(`inv ${n} ${invTouched.join(" ")}`);
    ["gold", "armor", "emote"].forEach((kind, i) => out.push(`${kind} ${n} ${samples[3 + i].join(" ")}`));
  }
  if (hashTicks.has(n)) out.push(`tick ${n} ${hashState(z)}`);
  // The reference's statistics, sampled exactly as its main block does.
  if (t >= 20 && t % 20 === 0) {
    for (let c = 0; c < z.P; c += 10) {
      for (let id = 0; id < z.N; id++) if (z.visible(c, id)) { vis++; if (id < z.P && z.near(c, id)) nearN++; }
      nSamples++;
    }
  }
}
for (let c = 0; c < z.P; c++) {
  const v = [], nr = [];
  for (let id = 0; id < z.N; id++) if (z.visible(c, id)) { v.push(id); if (id < z.P && z.near(c, id)) nr.push(id); }
  const h = new FNV();
  for (const id of v) h.u32(id);
  for (const id of nr) h.u32(id);
  out.push(`view ${c} ${v.length} ${nr.length} ${h.hex()}`);
}
out.push(`stats ${vis} ${nearN} ${nSamples}`);
process.stdout.write(out.join("\n") + "\n");
