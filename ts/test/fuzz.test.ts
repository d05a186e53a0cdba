// Robustness: random and mutated input never throws anything but a
// ReplicaDecodeError, never hangs, and a rejected tick leaves the replica
// exactly as it was (docs/protocol.md §7.3), down to the canonical dump.
// FUZZ_ITER scales the number of mutations per tick (default 150).
import { describe, expect, test } from "vitest";
import { decodeDescriptor, writeDescriptor } from "../src/descriptor.js";
import { dumpEntities } from "../src/dump.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { Replica } from "../src/replica.js";
import { encodeHello } from "../src/session.js";
import { encodeTick, encodeWelcome, parseAny as parseMessage } from "../src/peer.js";
import { Vis, type Schema } from "../src/schema.js";
import { diff, dumpEntity, loadVectors, tohex, unhex } from "./helpers.js";

const ITER = Number(process.env.FUZZ_ITER ?? 150);

function prng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/** One mutation of b: bit flips, byte changes, truncation, insertion, deletion or splicing. */
function mutate(b: Uint8Array, rnd: () => number, other: Uint8Array): Uint8Array {
  const n = b.length;
  const at = (m: number) => Math.floor(rnd() * Math.max(1, m));
  switch (at(7)) {
    case 0: {
      const c = Uint8Array.from(b);
      for (let i = 1 + at(3); i > 0 && n > 0; i--) c[at(n)]! ^= 1 << at(8);
      return c;
    }
    case 1: {
      const c = Uint8Array.from(b);
      if (n > 0) c[at(n)] = at(256);
      return c;
    }
    case 2:
      return b.subarray(0, at(n));
    case 3: {
      const i = at(n + 1);
      return Uint8Array.from([...b.subarray(0, i), at(256), ...b.subarray(i)]);
    }
    case 4: {
      const i = at(n);
      return Uint8Array.from([...b.subarray(0, i), ...b.subarray(i + 1 + at(4))]);
    }
    case 5: {
      const i = at(n);
      return Uint8Array.from([...b.subarray(0, i), ...other.subarray(at(other.length))]);
    }
    default: {
      const c = new Uint8Array(at(40));
      for (let i = 0; i < c.length; i++) c[i] = at(256);
      return c;
    }
  }
}

function applyChecked(r: Replica, segs: Uint8Array[]): boolean {
  const before = dumpEntities(r.entities());
  try {
    r.applyTick(segs);
    return true;
  } catch (e) {
    if (!(e instanceof ReplicaDecodeError)) throw e;
    const after = dumpEntities(r.entities());
    if (after !== before) throw new Error(`rejected tick changed the replica (${e.message})`);
    return false;
  }
}

describe("fuzz: mutated golden vector segments", () => {
  for (const { file, v } of loadVectors()) {
    test(file, () => {
      const schema: Schema = decodeDescriptor(unhex(v.descriptor));
      const ticks = v.ticks.map((t) => t.segments.map(unhex));
      const all = ticks.flat();
      const vis = v.view === "owner" ? Vis.Owner : Vis.Others;
      const rnd = prng(file.length * 7919 + ticks.length);
      const upTo = (i: number): Replica => {
        const r = new Replica(schema, { limits: { maxContainerLen: 64, maxValues: 4096, maxDepth: 8 } });
        for (let j = 0; j < i; j++) r.applyTick(ticks[j]!);
        return r;
      };
      let rejected = 0;
      let accepted = 0;
      const deadline = Date.now() + 8000;
      for (let i = 0; i < ticks.length; i++) {
        let r = upTo(i);
        for (let it = 0; it < ITER && Date.now() < deadline; it++) {
          const segs = ticks[i]!.slice();
          if (segs.length === 0) segs.push(new Uint8Array(1));
          const j = Math.floor(rnd() * segs.length);
          segs[j] = mutate(segs[j]!, rnd, all[Math.floor(rnd() * all.length)]!);
          if (applyChecked(r, segs)) {
            accepted++;
            r = upTo(i);
          } else rejected++;
        }
        // After any number of rejected ticks the genuine one still applies exactly.
        r.applyTick(ticks[i]!);
        expect(diff(r.entities().map((e) => dumpEntity(e, vis)), v.ticks[i]!.state)).toBe("");
      }
      expect(rejected).toBeGreaterThan(0);
      void accepted;
    });
  }
});

describe("fuzz: random bytes", () => {
  test("random segments on a populated replica", () => {
    const { v } = loadVectors().find((x) => x.file === "containers.json")!;
    const schema = decodeDescriptor(unhex(v.descriptor));
    const r = new Replica(schema);
    r.applyTick(v.ticks[0]!.segments.map(unhex));
    const rnd = prng(4242);
    for (let it = 0; it < ITER * 10; it++) {
      const b = new Uint8Array(Math.floor(rnd() * 64));
      for (let i = 0; i < b.length; i++) b[i] = Math.floor(rnd() * 256);
      if (b.length > 0 && rnd() < 0.5) b[0] = (b[0]! & ~7) | (1 + Math.floor(rnd() * 5)); // a valid tag
      applyChecked(r, [b]);
    }
  });

  test("mutated vector descriptors: rejected with the typed error, or canonical", () => {
    const rnd = prng(77);
    let accepted = 0;
    const descs = loadVectors().map((x) => unhex(x.v.descriptor));
    for (let it = 0; it < ITER * 10; it++) {
      const d = mutate(descs[it % descs.length]!, rnd, descs[(it + 1) % descs.length]!);
      let schema;
      try {
        schema = decodeDescriptor(d);
      } catch (e) {
        expect(e).toBeInstanceOf(ReplicaDecodeError);
        continue;
      }
      // Only the canonical encoding is accepted: what the encoder writes for the schema.
      expect(tohex(writeDescriptor(schema))).toBe(tohex(d));
      accepted++;
    }
    expect(accepted).toBeGreaterThan(0);
  });

  test("mutated session messages: HELLO with a resume block, WELCOME with a ticket, TICK", () => {
    const rnd = prng(606);
    const held = Array.from({ length: 40 }, (_, i) => ({ slot: 3 * i + (i % 2), generation: i * 7, level: i % 5, owned: i % 3 === 0 }));
    const msgs = [
      encodeHello({ descriptor: Uint8Array.of(1, 2), token: Uint8Array.of(3), resume: { ticket: [0x1234n, 2n ** 64n - 1n], tick: 99n, held } }),
      encodeWelcome({ version: 7, descriptor: Uint8Array.of(5), session: 3n, userId: "u", tickRate: 20, ticket: [7n, 8n], resumed: true }),
      encodeTick({ tick: 5n, segments: 2, gained: [1], lost: [2], levels: [{ id: 3, level: 1 }] }),
    ];
    for (let it = 0; it < ITER * 20; it++) {
      const m = mutate(msgs[it % msgs.length]!, rnd, msgs[(it + 1) % msgs.length]!);
      try {
        parseMessage(m);
      } catch (e) {
        expect(e).toBeInstanceOf(ReplicaDecodeError);
      }
    }
  });
});
