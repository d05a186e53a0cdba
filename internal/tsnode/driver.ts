// The Node side of package tsnode: a TypeScript client runtime replica
// driven over stdin/stdout by a Go process (see tsnode.go for the frames).
// Bundled with esbuild at run time; "@replicago/replica" is ts/src.
import { Replica, decodeDescriptor, encodeUTF8 } from "@replicago/replica";
import { dump } from "./canon.js";

let rep: Replica | undefined;
let buf: Uint8Array = new Uint8Array(0);

function send(status: string, body: Uint8Array): void {
  const out = new Uint8Array(5 + body.length);
  new DataView(out.buffer).setUint32(0, 1 + body.length, true);
  out[4] = status.charCodeAt(0);
  out.set(body, 5);
  process.stdout.write(out);
}

function handle(p: Uint8Array): void {
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const op = String.fromCharCode(p[0]!);
  let at = 1;
  const u32 = (): number => {
    const v = dv.getUint32(at, true);
    at += 4;
    return v;
  };
  const u16 = (): number => {
    const v = dv.getUint16(at, true);
    at += 2;
    return v;
  };
  switch (op) {
    case "I": {
      const n = u32();
      const local = decodeDescriptor(p.subarray(at, at + n));
      const rest = p.subarray(at + n);
      rep = new Replica(local, rest.length > 0 ? { remote: decodeDescriptor(rest) } : {});
      send("O", new Uint8Array(0));
      return;
    }
    case "T": {
      const gained: number[] = [];
      const lost: number[] = [];
      const levels: { id: number; level: number }[] = [];
      for (let n = u16(); n > 0; n--) gained.push(u32());
      for (let n = u16(); n > 0; n--) lost.push(u32());
      for (let n = u16(); n > 0; n--) {
        const id = u32();
        levels.push({ id, level: p[at++]! });
      }
      const segs: Uint8Array[] = [];
      for (let n = u16(); n > 0; n--) {
        const len = u32();
        segs.push(p.subarray(at, at + len));
        at += len;
      }
      const t0 = process.hrtime.bigint();
      rep!.applyTick(segs, { gained, lost, levels });
      const ns = Number(process.hrtime.bigint() - t0);
      const out = new Uint8Array(8);
      new DataView(out.buffer).setFloat64(0, ns, true);
      send("O", out);
      return;
    }
    case "D":
      send("O", encodeUTF8(dump(rep!.entities())));
      return;
    case "Q":
      process.exit(0);
  }
  throw new Error(`unknown op ${op}`);
}

process.stdin.on("data", (chunk: Buffer) => {
  if (buf.length === 0) buf = chunk;
  else {
    const b = new Uint8Array(buf.length + chunk.length);
    b.set(buf);
    b.set(chunk, buf.length);
    buf = b;
  }
  for (;;) {
    if (buf.length < 4) return;
    const n = new DataView(buf.buffer, buf.byteOffset).getUint32(0, true);
    if (buf.length < 4 + n) return;
    const p = buf.subarray(4, 4 + n);
    buf = buf.subarray(4 + n);
    try {
      handle(p);
    } catch (e) {
      send("E", encodeUTF8(String((e as Error)?.stack ?? e)));
    }
  }
});
process.stdin.on("end", () => process.exit(0));
