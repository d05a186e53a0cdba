// The golden wire vectors of testdata/vectors (see its README): every file
// decoded with nothing but its own contents must give the committed state
// after every tick, as codec/golden_test.go's gvCheckFile does in Go.
import { describe, expect, test } from "vitest";
import { decodeDescriptor } from "../src/descriptor.js";
import { Replica } from "../src/replica.js";
import { Vis } from "../src/schema.js";
import { diff, dumpEntity, loadVectors, unhex } from "./helpers.js";

const vectors = loadVectors();

describe("golden vectors", () => {
  test("every scenario file is present", () => {
    expect(vectors.map((v) => v.file)).toEqual(
      expect.arrayContaining([
        "containers.json", "late-join.json", "nested.json", "scalars.json",
        "views-others.json", "views-owner.json", "w1-quantized-3ticks.json", "ranked.json",
      ]),
    );
  });

  for (const { file, v } of vectors) {
    test(file, () => {
      // The committed vectors are protocol version 3 (descriptor version 1).
      const schema = decodeDescriptor(unhex(v.descriptor));
      const rep = new Replica(schema);
      const vis = v.view === "owner" ? Vis.Owner : Vis.Others;
      v.ticks.forEach((tk, i) => {
        rep.apply(...tk.segments.map(unhex));
        const got = rep.entities().map((e) => dumpEntity(e, vis));
        const d = diff(got, tk.state);
        expect(d, `${file} tick ${i}`).toBe("");
      });
    });
  }
});
