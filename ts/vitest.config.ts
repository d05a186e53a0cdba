import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // Files replicagen -ts generated in the Go packages import the runtime by its package name.
  resolve: { alias: { "@replicago/replica": fileURLToPath(new URL("./src/index.ts", import.meta.url)) } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30000,
    benchmark: { include: ["bench/**/*.bench.ts"] },
  },
});
