// The usage ledger's backlog, which /metrics shows (modelhost_usage_ledger_*): the lag of the
// oldest unwritten usage grows while the store fails, the rows are kept and counted, and all goes
// back to 0 once a flush commits.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { AccessStore } from "../../src/access/AccessStore.js";
import { USAGE_FLUSH_MS, UsageBuffer } from "../../src/access/UsageBuffer.js";

type Rows = Parameters<AccessStore["recordUsage"]>[0];

const row = (tokens: number) => ({
  accountId: "a1",
  tokenId: "t1",
  model: "tiny",
  day: "2025-01-01",
  requests: 1,
  promptTokens: tokens,
  completionTokens: tokens,
});

describe("UsageBuffer backlog", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] }));
  afterEach(() => vi.useRealTimers());

  it("reports the lag, pending rows and failed flushes while the store fails, and 0 once a flush commits", async () => {
    let failing = true;
    const written: Rows[] = [];
    const store = {
      recordUsage: async (rows: Rows) => {
        if (failing) throw new Error("database is locked");
        written.push(rows);
      },
    } as unknown as AccessStore;
    const errors: unknown[] = [];
    const buffer = new UsageBuffer(store, (error) => errors.push(error));
    expect(buffer.backlog()).toEqual({ pendingRows: 0, lagMs: 0, failedFlushes: 0 });

    buffer.add(row(1));
    await vi.advanceTimersByTimeAsync(5);
    expect(buffer.backlog()).toEqual({ pendingRows: 1, lagMs: 5, failedFlushes: 0 });

    // Each flush fails and keeps the row for the next; the lag runs from the first usage kept.
    await vi.advanceTimersByTimeAsync(USAGE_FLUSH_MS * 10);
    buffer.add(row(2));
    const failed = buffer.backlog();
    expect(failed.pendingRows).toBe(1);
    expect(failed.lagMs).toBe(5 + USAGE_FLUSH_MS * 10);
    expect(failed.failedFlushes).toBeGreaterThanOrEqual(9);
    expect(errors).toHaveLength(failed.failedFlushes);
    expect(written).toEqual([]);

    failing = false;
    await vi.advanceTimersByTimeAsync(USAGE_FLUSH_MS);
    expect(buffer.backlog()).toEqual({ pendingRows: 0, lagMs: 0, failedFlushes: failed.failedFlushes });
    // Nothing lost or counted twice: one row with both requests.
    expect(written).toEqual([[{ ...row(1), requests: 2, promptTokens: 3, completionTokens: 3 }]]);
  });
});
