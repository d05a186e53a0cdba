// WebTransport framing (docs/protocol.md §10.1): a varint length, then the message.
import { describe, expect, test } from "vitest";
import { ReplicaDecodeError } from "../src/errors.js";
import { FrameReader, frame } from "../src/transport.js";

const bytes = (n: number, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);

describe("frames", () => {
  test("lengths are minimal unsigned LEB128 varints", () => {
    expect([...frame(Uint8Array.of(9, 8))]).toEqual([2, 9, 8]);
    expect([...frame(new Uint8Array(0))]).toEqual([0]);
    expect([...frame(new Uint8Array(127)).subarray(0, 1)]).toEqual([127]);
    expect([...frame(new Uint8Array(128)).subarray(0, 2)]).toEqual([0x80, 0x01]);
    expect([...frame(new Uint8Array(300)).subarray(0, 2)]).toEqual([0xac, 0x02]);
    expect([...frame(new Uint8Array(1 << 20)).subarray(0, 3)]).toEqual([0x80, 0x80, 0x40]);
  });

  test("a stream of frames splits back into its messages at any chunking", () => {
    const msgs = [bytes(0), bytes(1), bytes(127), bytes(128, 2), bytes(5000, 3), bytes(3, 4)];
    const stream = Uint8Array.from(msgs.flatMap((m) => [...frame(m)]));
    for (const size of [1, 2, 3, 7, 128, 129, 4999, stream.length]) {
      const r = new FrameReader(1 << 20);
      const got: Uint8Array[] = [];
      for (let i = 0; i < stream.length; i += size) got.push(...r.push(stream.subarray(i, i + size)).map((m) => Uint8Array.from(m)));
      expect(got).toEqual(msgs);
    }
  });

  test("a frame over the limit is refused from its length alone", () => {
    const r = new FrameReader(100);
    expect(r.push(frame(bytes(100)))).toHaveLength(1);
    // Only the length of a 101-byte frame has arrived.
    expect(() => r.push(Uint8Array.of(101))).toThrow(/limit: message of 101 bytes > 100/);
  });

  test("non-minimal and overlong lengths are malformed", () => {
    expect(() => new FrameReader(1000).push(Uint8Array.of(0x81, 0x00))).toThrow(ReplicaDecodeError);
    expect(() => new FrameReader(2 ** 60).push(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01))).toThrow(/too long/);
  });
});

describe("frames, fuzzed", () => {
  test("random byte streams give messages within the limit or the typed error", () => {
    const iters = Number(process.env.FUZZ_ITER ?? 300);
    let s = 7;
    const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) >>> 8) & 0xff;
    for (let i = 0; i < iters; i++) {
      const r = new FrameReader(64 + (rnd() % 200));
      const b = new Uint8Array(1 + ((rnd() << 2) % 600));
      for (let j = 0; j < b.length; j++) b[j] = rnd() < 200 ? rnd() % 0x40 : rnd();
      let total = 0;
      try {
        for (let j = 0; j < b.length; ) {
          const n = 1 + (rnd() % 40);
          for (const m of r.push(b.subarray(j, j + n))) {
            expect(m.length).toBeLessThanOrEqual(r.max);
            total += m.length;
          }
          j += n;
        }
      } catch (e) {
        expect(e).toBeInstanceOf(ReplicaDecodeError);
      }
      expect(total).toBeLessThanOrEqual(b.length);
    }
  });
});
