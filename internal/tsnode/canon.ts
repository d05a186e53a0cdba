// The canonical dump of a TypeScript replica (tsnode.Canonical renders a Go
// one in the same text), for the Node programs of the cross-language tests.
import { encodeUTF8, BagC, ListC, MapC, Rec, type Entity } from "@replicago/replica";

const hex = (b: Uint8Array): string => {
  let s = "";
  for (const x of b) s += (x < 16 ? "0" : "") + x.toString(16);
  return s;
};

function s64(lo: number, hi: number): string {
  return hi === 0 ? lo.toString(16) : hi.toString(16) + lo.toString(16).padStart(8, "0");
}

/** The halves of S of a container element or key (a number for narrow kinds, else a BigInt). */
function fromElemHalves(v: number | bigint): [number, number] {
  if (typeof v === "number") return [v >>> 0, v < 0 ? 0xffffffff : 0];
  const u = BigInt.asUintN(64, v);
  return [Number(u & 0xffffffffn), Number(u >> 32n)];
}

function elem(v: unknown): string {
  if (v instanceof Rec) return rec(v);
  if (typeof v === "string") return "s" + hex(encodeUTF8(v));
  if (v instanceof Uint8Array) return "b" + hex(v);
  const [lo, hi] = fromElemHalves(v as number | bigint);
  return s64(lo, hi);
}

function rec(r: Rec): string {
  const parts: string[] = [];
  for (const l of r.type.leaves) {
    if (l.num >= 0) {
      parts.push(s64(r.num[2 * l.num]!, r.num[2 * l.num + 1]!));
      continue;
    }
    const o = r.obj[l.obj];
    if (o instanceof ListC) parts.push("[" + o.items.map(elem).join(",") + "]");
    else if (o instanceof MapC || o instanceof BagC) {
      const m = o.m as Map<unknown, unknown>;
      parts.push("{" + o.keys().map((k) => elem(k) + ":" + elem(m.get(k))).join(",") + "}");
    } else parts.push(elem(o));
  }
  return "(" + parts.join(",") + ")";
}

/** The canonical dump (tsnode.Canonical in Go): entities by ascending ID. */
export function dump(ents: Entity[]): string {
  return [...ents]
    .sort((a, b) => a.id - b.id)
    .map((e) => `${e.id.toString(16)} c${e.classId} o${e.owned ? 1 : 0} l${e.level} ${rec(e)}\n`)
    .join("");
}

