import { readFileSync } from "node:fs";

/**
 * The process's peak resident set size (VmHWM on Linux), in bytes; elsewhere its current RSS. The
 * fuzz and soak suites run server and clients in one process, so this bounds both together.
 */
export function peakResidentBytes(): number {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync("/proc/self/status", "utf8"))?.[1];
    if (kb !== undefined) return Number(kb) * 1024;
  } catch {
    // not Linux
  }
  return process.memoryUsage().rss;
}
