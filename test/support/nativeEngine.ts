import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { withFileLock } from "../../src/models/fileLock.js";

const run = promisify(execFile);
const repo = path.resolve(import.meta.dirname, "../..");
const bin = path.join(repo, "bin/modelhost.cjs");

/** Whether `modelhost engine status` finds the native build (what `--engine auto` then loads). */
export async function nativeEngineBuilt(): Promise<boolean> {
  return (await run(process.execPath, [bin, "engine", "status", "--engine", "auto"])).stdout.includes("backend: native");
}

/**
 * Makes sure the native engine is built, building it (`modelhost engine build`, minutes) unless a
 * build exists. test/engine's files run two at a time, and more than one needs the build: they take
 * turns under a lock, so one builds and the others find it built. Resolves to the build's output
 * when this call built it.
 */
export async function ensureNativeEngine(): Promise<{ built: false } | { built: true; stdout: string }> {
  const lock = path.join(repo, ".cache", "native-engine-build.lock");
  await mkdir(path.dirname(lock), { recursive: true });
  return withFileLock(
    lock,
    { waitMs: 40 * 60_000, staleAfterMs: Infinity, busyMessage: "another test process is building the native engine" },
    async () => {
      if (await nativeEngineBuilt()) return { built: false };
      // Not niced: test/engine runs apart from the other suites (scripts/runTests.ts), and on a busy
      // machine a niced build took 20 minutes instead of 5.
      const { stdout } = await run(process.execPath, [bin, "engine", "build"], { maxBuffer: 64 * 1024 * 1024 });
      return { built: true, stdout };
    },
  );
}
