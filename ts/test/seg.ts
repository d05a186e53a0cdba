// A small hand encoder of segments (docs/protocol.md §5) for tests.
import { BitWriter } from "../src/bits.js";

export interface TreeEntry {
  id: number;
  k?: number; // for U(k)-coded numeric leaves
  sub?: TreeEntry[]; // nested
}

export class Seg {
  readonly w = new BitWriter();

  section(tag: number, classId: number, ngroups: number): this {
    this.w.bits(tag, 3);
    this.w.u(classId, 4);
    this.w.u(ngroups, 0);
    return this;
  }

  /** A field tree (§5.5); gapK is 0 in ranked update sections. */
  tree(entries: TreeEntry[], gapK = 2): this {
    this.w.u(entries.length, 2);
    let prev = 0;
    for (const e of entries) {
      this.w.u(e.id - prev - 1, gapK);
      prev = e.id;
      if (e.sub) this.tree(e.sub, gapK);
      else if (e.k !== undefined) this.w.bits(e.k, 6);
    }
    return this;
  }

  ids(slots: number[], k = 8): this {
    this.w.u(slots.length, 3);
    this.w.bits(k, 6);
    let prev = -1;
    for (const s of slots) {
      this.w.u(s - prev - 1, k);
      prev = s;
    }
    return this;
  }

  gens(gens: number[], k = 8): this {
    this.w.bits(k, 6);
    for (const g of gens) this.w.u(g, k);
    return this;
  }

  u(v: number, k: number): this {
    this.w.u(v, k);
    return this;
  }

  /** U(k) of zigzag(v). */
  s(v: number, k: number): this {
    this.w.u(v < 0 ? -2 * v - 1 : 2 * v, k);
    return this;
  }

  bits(v: number, n: number): this {
    this.w.bits(v, n);
    return this;
  }

  str(s: string): this {
    this.w.string(s);
    return this;
  }

  destroy(slots: number[]): this {
    this.w.bits(3, 3);
    return this.ids(slots);
  }

  end(): Uint8Array {
    this.w.bits(0, 3);
    return this.w.finish();
  }
}

export const seg = (): Seg => new Seg();
