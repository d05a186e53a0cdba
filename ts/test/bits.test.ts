// The bit reader and U(k) (docs/protocol.md §1) against the examples of
// §1.2 and the worked example bytes of §9, and against a BigInt model.
import { describe, expect, test } from "vitest";
import { BitReader, BitWriter, decodeUTF8, unzigzagBig, zigzagBig } from "../src/bits.js";
import { ReplicaDecodeError } from "../src/errors.js";
import { unhex } from "./helpers.js";

/** Bytes of a stream written as in the protocol's tables: bits in stream order. */
function stream(bits: string): Uint8Array {
  const b = bits.replace(/\s+/g, "");
  const out = new Uint8Array(Math.ceil(b.length / 8));
  for (let q = 0; q < b.length; q++) if (b[q] === "1") out[q >> 3]! |= 1 << (q & 7);
  return out;
}

/** Reference U(k) decoder on a string of stream-order bits, straight from the pseudocode of §1.2. */
function refU(bits: string, k: number): { v: bigint; used: number } {
  let p = 0;
  const bit = (): number => (p < bits.length ? Number(bits[p++]) : (() => { throw new Error("eof"); })());
  const read = (n: number): bigint => {
    let v = 0n;
    for (let i = 0; i < n; i++) v |= BigInt(bit()) << BigInt(i);
    return v;
  };
  let ones = 0;
  while (ones < 64 - k) {
    if (bit() === 0) break;
    ones++;
  }
  if (ones === 0) return { v: read(k), used: p };
  const b = k + ones;
  return { v: (1n << BigInt(b - 1)) | read(b - 1), used: p };
}

function streamBits(b: Uint8Array, n: number): string {
  let s = "";
  for (let q = 0; q < n; q++) s += (b[q >> 3]! >> (q & 7)) & 1;
  return s;
}

describe("bit order (§1.1)", () => {
  test("stream bit q is bit q mod 8 of byte q/8, fields low bit first", () => {
    const r = new BitReader(Uint8Array.of(0b10110001, 0b00000011));
    expect(r.bits(1)).toBe(1);
    expect(r.bits(3)).toBe(0); // stream bits 1..3 = 0,0,0
    expect(r.bits(4)).toBe(0b1011); // bits 4..7 of byte 0
    expect(r.bits(2)).toBe(3);
    expect(r.len - r.pos).toBe(6);
  });

  test("bits(3) of value 1 is written 100", () => {
    const w = new BitWriter();
    w.bits(1, 3);
    expect(streamBits(w.finish(), 3)).toBe("100");
  });

  test("64-bit fields span bytes at any offset", () => {
    for (let off = 0; off < 8; off++) {
      const w = new BitWriter();
      w.bits(0, off);
      w.bitsWide(0x89abcdef, 0x01234567, 64);
      const r = new BitReader(w.finish());
      r.bits(off);
      expect(r.bitsWide(64)).toBe(0x89abcdef);
      expect(r.hi).toBe(0x01234567);
    }
  });

  test("a read past the end is a typed truncation error", () => {
    const r = new BitReader(Uint8Array.of(0xff));
    r.bits(5);
    expect(() => r.bits(4)).toThrow(ReplicaDecodeError);
    try {
      new BitReader(Uint8Array.of(0xff)).u(0);
    } catch (e) {
      expect((e as ReplicaDecodeError).code).toBe("truncated");
    }
  });
});

describe("U(k) (§1.2)", () => {
  // value, k, bits in stream order: the table of §1.2.
  const table: [bigint, number, string][] = [
    [0n, 0, "0"],
    [1n, 0, "10"],
    [5n, 3, "0 101"],
    [9n, 3, "1 0 100"],
    [6n, 2, "1 0 01"],
    [4n, 4, "0 0010"],
    [2n ** 23n, 23, "1 0" + "0".repeat(23)],
  ];
  for (const [v, k, bits] of table) {
    test(`${v} as U(${k}) is ${bits}`, () => {
      const w = new BitWriter();
      w.uBig(v, k);
      const n = bits.replace(/ /g, "").length;
      expect(w.pos).toBe(n);
      expect(streamBits(w.finish(), n)).toBe(bits.replace(/ /g, ""));
      const r = new BitReader(stream(bits));
      expect(r.uBig(k)).toBe(v);
      expect(r.pos).toBe(n);
    });
  }

  test("b = 64 has no terminator: 127 − k bits", () => {
    for (const k of [0, 1, 31, 32, 63]) {
      const v = 2n ** 64n - 1n;
      const w = new BitWriter();
      w.uBig(v, k);
      expect(w.pos).toBe(127 - k);
      const r = new BitReader(w.finish());
      expect(r.uBig(k)).toBe(v);
      expect(r.pos).toBe(127 - k);
    }
  });

  test("agrees with the reference decoder on random codes, every k", () => {
    let seed = 12345;
    const rnd = (): number => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0);
    for (let i = 0; i < 4000; i++) {
      const k = rnd() % 64;
      const len = rnd() % 65;
      let v = len === 0 ? 0n : (BigInt(rnd()) << 32n) | BigInt(rnd());
      v &= len === 64 ? 2n ** 64n - 1n : (1n << BigInt(len)) - 1n;
      const off = rnd() % 13;
      const w = new BitWriter();
      w.bits(rnd(), off);
      w.uBig(v, k);
      w.bits(rnd(), 7);
      const bytes = w.finish();
      const r = new BitReader(bytes);
      r.bits(off);
      expect(r.uBig(k)).toBe(v);
      const ref = refU(streamBits(bytes, bytes.length * 8).slice(off), k);
      expect(ref.v).toBe(v);
      expect(r.pos - off).toBe(ref.used);
    }
  });

  test("random bits decode like the reference decoder", () => {
    let seed = 99;
    const rnd = (): number => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0);
    for (let i = 0; i < 3000; i++) {
      const bytes = new Uint8Array(20);
      for (let j = 0; j < bytes.length; j++) bytes[j] = rnd() & 0xff;
      if (i % 3 === 0) bytes.fill(0xff, 0, rnd() % 20);
      const k = rnd() % 64;
      let ref: { v: bigint; used: number } | undefined;
      try {
        ref = refU(streamBits(bytes, 160), k);
      } catch {
        ref = undefined;
      }
      const r = new BitReader(bytes);
      if (ref) {
        expect(r.uBig(k)).toBe(ref.v);
        expect(r.pos).toBe(ref.used);
      } else {
        expect(() => r.uBig(k)).toThrow(ReplicaDecodeError);
      }
    }
  });
});

describe("zigzag (§1.3)", () => {
  test("maps 0, −1, 1, −2, 2 to 0, 1, 2, 3, 4 and back, on 64 bits", () => {
    expect([0n, -1n, 1n, -2n, 2n].map(zigzagBig)).toEqual([0n, 1n, 2n, 3n, 4n]);
    for (const v of [0n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 12345678901234n]) expect(unzigzagBig(zigzagBig(v))).toBe(v);
  });
});

describe("strings (§1.4, OQ 10)", () => {
  test("U(4) length then bytes, at any bit offset; invalid UTF-8 becomes U+FFFD", () => {
    for (let off = 0; off < 8; off++) {
      const w = new BitWriter();
      w.bits(0, off);
      w.string("héllo ✓");
      w.bytes(Uint8Array.of(0x61, 0xff, 0x62));
      const r = new BitReader(w.finish());
      r.bits(off);
      expect(r.string(100)).toBe("héllo ✓");
      expect(r.string(100)).toBe("a\ufffdb");
    }
  });

  test("a length over the limit or past the end is rejected", () => {
    const w = new BitWriter();
    w.string("abcdef");
    expect(() => new BitReader(w.finish()).string(5)).toThrow(/limit/);
    expect(() => new BitReader(w.finish().subarray(0, 4)).string(100)).toThrow(/truncated/);
  });

  test("ASCII fast path and TextDecoder agree", () => {
    const b = Uint8Array.from("plain ascii text", (c) => c.charCodeAt(0));
    expect(decodeUTF8(b)).toBe("plain ascii text");
  });
});

describe("§9 worked example bytes", () => {
  test("§9.2 create: tag, class, groups, tree, ID block, generations, values", () => {
    const r = new BitReader(unhex("1111030408500000807f00"));
    expect(r.bits(3)).toBe(1); // create
    expect(r.u(4)).toBe(1); // class ID
    expect(r.u(0)).toBe(1); // ngroups
    expect(r.u(2)).toBe(2); // n fields
    expect(r.u(2)).toBe(0); // idgap: field 1
    expect(r.bits(6)).toBe(3); // k of hp
    expect(r.u(2)).toBe(0); // idgap: field 2, raw
    expect(r.u(3)).toBe(1); // count
    expect(r.bits(6)).toBe(0); // k of gaps
    expect(r.u(0)).toBe(1); // gap: slot 1
    expect(r.bits(6)).toBe(0); // k of generations
    expect(r.u(0)).toBe(0); // generation
    expect(r.pos).toBe(44);
    expect(r.u(3)).toBe(9); // zigzag(−5)
    expect(r.bits(32)).toBe(0x3fc00000); // 1.5
    expect(r.bits(3)).toBe(0); // end
    r.finish();
  });

  test("§9.4 update: U(23) of 2^23 at bit 34", () => {
    const r = new BitReader(unhex("1249970005000000"));
    r.bits(16);
    expect(r.bits(6)).toBe(23);
    r.bits(12);
    expect(r.pos).toBe(34);
    expect(r.u(23)).toBe(2 ** 23);
    expect(r.pos).toBe(59);
  });

  test("§9.6 list: whole then operations", () => {
    const r = new BitReader(unhex("2109020450029d9800"));
    r.bits(35);
    expect(r.u(4)).toBe(5);
    const k = r.bits(6);
    expect(k).toBe(2);
    const codes = [0, 1, 2, 3, 4].map(() => r.u(k));
    expect(codes).toEqual([2, 3, 6, 0, 10]);
    expect(r.bits(3)).toBe(0);
    r.finish();
  });
});

describe("UTF-8 strings keep a leading byte order mark", () => {
  test("U+FEFF at the start is part of the string, as Go keeps it", () => {
    const b = new Uint8Array([0xef, 0xbb, 0xbf, 0x61, 0xc3, 0xbc]);
    expect(decodeUTF8(b)).toBe("\uFEFFaü");
    expect(decodeUTF8(new Uint8Array([0xef, 0xbb, 0xbf]))).toBe("\uFEFF");
  });
});
