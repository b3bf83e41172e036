import { describe, expect, it } from "vitest";
import { ResponseArchive } from "../../src/storedResponses/ResponseArchive.js";
import type { ResponseStore, StoredResponse } from "../../src/storedResponses/ResponseStore.js";

/** A store that keeps records in memory and remembers the clock each call was given. */
class MemoryStore implements ResponseStore {
  readonly records = new Map<string, StoredResponse>();
  readonly purges: number[] = [];
  async save(record: StoredResponse): Promise<void> {
    this.records.set(record.id, record);
  }
  async find(id: string, owner: string | null, now: number): Promise<StoredResponse | undefined> {
    const record = this.records.get(id);
    return record && record.owner === owner && record.expiresAt > now ? record : undefined;
  }
  async findItems(): Promise<Map<string, object>> {
    return new Map();
  }
  async delete(id: string, owner: string | null, now: number): Promise<boolean> {
    return (await this.find(id, owner, now)) !== undefined && this.records.delete(id);
  }
  async deleteExpired(now: number): Promise<number> {
    this.purges.push(now);
    return 0;
  }
  async close(): Promise<void> {}
}

describe("ResponseArchive", () => {
  it("stores a response until now + the time to live, by its clock, and hides it from then on", async () => {
    const store = new MemoryStore();
    let now = 1_000_000;
    const ttlMs = 30 * 24 * 3_600_000;
    const archive = new ResponseArchive(async () => store, { ttlMs, logger: console, now: () => now });
    await archive.save("resp_1", "acct", { id: "resp_1" }, [{ id: "msg_1" }]);
    expect(store.records.get("resp_1")).toEqual({
      id: "resp_1",
      owner: "acct",
      createdAt: 1_000_000,
      expiresAt: 1_000_000 + ttlMs,
      response: { id: "resp_1" },
      input: [{ id: "msg_1" }],
    });
    // The first save purges what has expired, at the same clock.
    expect(store.purges).toEqual([1_000_000]);

    now += ttlMs - 1;
    expect(await archive.find("resp_1", "acct")).toBeDefined();
    now += 1;
    expect(await archive.find("resp_1", "acct")).toBeUndefined();
    expect(await archive.delete("resp_1", "acct")).toBe(false);
  });
});
