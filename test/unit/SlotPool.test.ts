import { describe, expect, it } from "vitest";
import { ServerError } from "../../src/core/ServerError.js";
import { SlotPool } from "../../src/engine/SlotPool.js";

describe("SlotPool", () => {
  it("hands out free items, then queues first come first served", async () => {
    const pool = new SlotPool(["a"], 2);
    const signal = new AbortController().signal;
    const first = await pool.acquire(signal);
    const order: string[] = [];
    const second = pool.acquire(signal).then((item) => order.push(`second:${item}`));
    const third = pool.acquire(signal).then((item) => order.push(`third:${item}`));
    expect(pool.queued).toBe(2);
    pool.release(first);
    await second;
    pool.release("a");
    await third;
    expect(order).toEqual(["second:a", "third:a"]);
  });

  it("refuses with a retryable overload error when the queue is full", async () => {
    const pool = new SlotPool(["a"], 1);
    const signal = new AbortController().signal;
    await pool.acquire(signal);
    void pool.acquire(signal);
    const error = await pool.acquire(signal).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServerError);
    expect((error as ServerError).code).toBe("overloaded");
    expect((error as ServerError).details.retryAfter).toBe(1);
  });

  it("drops a waiter whose client left, so it never takes an item", async () => {
    const pool = new SlotPool(["a"], 4);
    const held = await pool.acquire(new AbortController().signal);
    const leaving = new AbortController();
    const abandoned = pool.acquire(leaving.signal);
    const staying = pool.acquire(new AbortController().signal);
    leaving.abort(new Error("gone"));
    await expect(abandoned).rejects.toThrow("gone");
    expect(pool.queued).toBe(1);
    pool.release(held);
    await expect(staying).resolves.toBe("a");
    expect(pool.active).toBe(1);
  });

  it("reports idle only with nothing active or queued", async () => {
    const pool = new SlotPool(["a", "b"], 4);
    expect(pool.idle).toBe(true);
    const item = await pool.acquire(new AbortController().signal);
    expect(pool.idle).toBe(false);
    pool.release(item);
    expect(pool.idle).toBe(true);
  });
});
