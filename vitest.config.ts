import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "examples/*/test/**/*.test.ts"],
    // Model tests load real GGUF files and decode on the CPU; two workers fit a 2-core machine.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    globalSetup: ["test/support/globalSetup.ts"],
  },
});
