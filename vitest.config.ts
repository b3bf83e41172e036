import path from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The slowest files, in seconds, from a fresh-clone `npm test` on 2 cores. Each file runs on one
 * worker, so one of these started last keeps the run going a minute after the other worker is
 * done: they start first. Vitest orders by its own timings of the last run when it has them (a
 * developer's checkout); a fresh clone has none, so these stand in (the rest: larger files first).
 */
const slowFiles: Record<string, number> = {
  "test/fuzz/hostileBodies.test.ts": 74,
  "test/deploy/nginxReplicas.test.ts": 71,
  "test/playground/playgroundSessions.test.ts": 66,
  "test/pull/cli.test.ts": 59,
  "test/http/shutdown.test.ts": 51,
  "test/hosted/cli.test.ts": 29,
  "test/access/accessStore.test.ts": 25,
  "test/hosted/replicas.test.ts": 24,
  "test/pull/run.test.ts": 21,
  "test/playground/localPlayground.test.ts": 18,
  "test/hosted/crashRelease.test.ts": 18,
  "test/playground/hostedPlayground.test.ts": 17,
  "test/http/streamTimeouts.test.ts": 17,
  "test/http/models.test.ts": 17,
  "test/http/observability.test.ts": 16,
  "test/http/ollama.test.ts": 15,
  "test/http/slowClients.test.ts": 14,
  "test/http/openapi.test.ts": 14,
  "test/hosted/responsesHosted.test.ts": 13,
  "test/hosted/hosted.test.ts": 13,
  "test/http/choicesAndLogprobs.test.ts": 12,
  "test/playground/playgroundCli.test.ts": 12,
};

/** Files that failed last time first (Vitest's own rule), then the longest first. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const estimate = (spec: TestSpecification): { failed: boolean; ms: number } => {
      const file = path.relative(this.ctx.config.root, spec.moduleId).split(path.sep).join("/");
      const cached = this.ctx.cache.getFileTestResults(`${spec.project.name}:${file}`);
      return { failed: cached?.failed ?? false, ms: cached?.duration ?? (slowFiles[file] ?? 0) * 1000 };
    };
    const estimates = new Map(sorted.map((spec) => [spec, estimate(spec)]));
    // Stable: files with no estimate keep Vitest's order.
    return sorted.sort((a, b) => {
      const ea = estimates.get(a)!;
      const eb = estimates.get(b)!;
      return Number(eb.failed) - Number(ea.failed) || eb.ms - ea.ms;
    });
  }
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "examples/*/test/**/*.test.ts"],
    // Model tests load real GGUF files and decode on the CPU; two workers fit a 2-core machine.
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    globalSetup: ["test/support/globalSetup.ts"],
    sequence: { sequencer: LongestFirst },
  },
});
