// A server with nothing to do lets its event loop sleep. Every wake of the main thread takes a core
// from whatever runs beside it, a decode's threads above all: prom-client's default event-loop lag
// sampling (a 10 ms timer) cost one bench-model stream 0.7% (docs/performance.md). Linux only: the
// count comes from /proc.
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { startServerProcess } from "../support/startServerProcess.js";

/** The times the process's main thread has gone to sleep (each a wake to come). */
function mainThreadSleeps(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8");
  return Number(/^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status)![1]);
}

describe.skipIf(!existsSync("/proc/self/task"))("an idle server (needs Linux's /proc)", () => {
  it("wakes its event loop a few times a second, not a hundred", async () => {
    const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-idle-"));
    const server = await startServerProcess(["--models-dir", modelsDir]);
    try {
      // Serve something first, the metrics included, so that whatever starts on first use has.
      expect((await fetch(`${server.url}/v1/models`)).status).toBe(200);
      expect((await fetch(`${server.url}/metrics`)).status).toBe(200);
      await sleep(500);
      const before = mainThreadSleeps(server.pid);
      await sleep(2000);
      // ~22 here (the lag histogram's 100 ms timer and a little more); its 10 ms default made
      // more than 200.
      expect(mainThreadSleeps(server.pid) - before).toBeLessThan(60);
    } finally {
      await server.stop();
      await rm(modelsDir, { recursive: true, force: true });
    }
  });
});
