// Generates golden.txt for the Go port of workload W1 from the JavaScript
// reference generator. Usage (from this directory):
//
//	node gen_golden.mjs ../../../../../shared/workloads/w1.mjs > golden.txt
//
// The argument is the path to w1.mjs (resolved against the current directory).
//
// Line format (space separated, see w1_test.go):
//
//	rand <seed> <v1> ... <v8>            first outputs of rng(seed), JS shortest decimal
//	tick <n> <fnv>                         state hash after tick n
//	moved <n> <id> ...                     moved ids returned by step n
//	hpchanged <n> <id> ...                 hpChanged ids returned by step n
//	client <c> <cx> <cy> <half> <count>    AOI client c (makeClients(100)) and its
//	                                       visible entity count after the last tick
//
// <fnv> is FNV-1a 64 (16 lower-case hex digits) over the bytes of the x,
// y, angle (float32 bit patterns, 4 bytes each, little-endian) and hp (int16,
// 2 bytes each, little-endian) arrays, in that order, each in id order.
import path from "node:path";
import { pathToFileURL } from "node:url";

const ref = process.argv[2];
if (!ref) {
  console.error("usage: node gen_golden.mjs <path/to/w1.mjs>");
  process.exit(2);
}
const { World, rng } = await import(pathToFileURL(path.resolve(ref)).href);

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = (1n << 64n) - 1n;

function hashState(w) {
  let h = FNV_OFFSET;
  const byte = (b) => { h = ((h ^ BigInt(b & 0xff)) * FNV_PRIME) & MASK; };
  // Bit patterns via unsigned views of the same buffers (endianness-independent),
  // then serialized little-endian.
  for (const a of [w.x, w.y, w.angle]) {
    const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
    for (let i = 0; i < u.length; i++) {
      const v = u[i];
      byte(v); byte(v >>> 8); byte(v >>> 16); byte(v >>> 24);
    }
  }
  const u = new Uint16Array(w.hp.buffer, w.hp.byteOffset, w.hp.length);
  for (let i = 0; i < u.length; i++) { byte(u[i]); byte(u[i] >>> 8); }
  return h.toString(16).padStart(16, "0");
}

const out = [];
for (const seed of [1, 2]) {
  const r = rng(seed), vs = [];
  for (let i = 0; i < 8; i++) vs.push(String(r()));
  out.push(`rand ${seed} ${vs.join(" ")}`);
}

const w = new World();
out.push(`tick 0 ${hashState(w)}`);
const ticks = new Set([1, 2, 10, 100, 600]);
for (let t = 1; t <= 600; t++) {
  const { moved, hpChanged } = w.step();
  if (t === 1) {
    out.push(`moved 1 ${moved.join(" ")}`);
    out.push(`hpchanged 1 ${hpChanged.join(" ")}`);
  }
  if (ticks.has(t)) out.push(`tick ${t} ${hashState(w)}`);
}
const clients = w.makeClients(100);
clients.forEach((cl, c) => {
  out.push(`client ${c} ${cl.cx} ${cl.cy} ${cl.half} ${w.query(cl).length}`);
});
process.stdout.write(out.join("\n") + "\n");
