import { describe, expect, it } from "vitest";
import { DecodeBarrier } from "../../src/engine/DecodeBarrier.js";

/** An iterator whose next() resolves only when the test says so, recording when it was asked. */
function controlledIterator(name: string, log: string[]) {
  const pending: Array<() => void> = [];
  let count = 0;
  const iterator: AsyncIterator<number> = {
    next: () => {
      log.push(`${name} asks`);
      return new Promise((resolve) => pending.push(() => resolve({ done: false, value: count++ })));
    },
  };
  return { iterator, deliver: () => pending.shift()?.() };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe("DecodeBarrier", () => {
  it("lets a sequence that is alone ask at once", async () => {
    const barrier = new DecodeBarrier();
    const log: string[] = [];
    const a = controlledIterator("a", log);
    barrier.join();
    const step = barrier.next(a.iterator);
    expect(log).toEqual(["a asks"]);
    a.deliver();
    await expect(step).resolves.toEqual({ done: false, value: 0 });
  });

  it("holds a sequence back until the others' tokens of the current batch have arrived, then releases all together", async () => {
    const barrier = new DecodeBarrier();
    const log: string[] = [];
    const a = controlledIterator("a", log);
    const b = controlledIterator("b", log);
    barrier.join();
    barrier.join();

    // Both ask; the first batch is in flight for both.
    const a1 = barrier.next(a.iterator);
    const b1 = barrier.next(b.iterator);
    await turn();
    expect(log).toEqual(["a asks", "b asks"]);

    // a's token arrives first; a wants its next token, but b's token of this batch is still out.
    a.deliver();
    await a1;
    const a2 = barrier.next(a.iterator);
    await turn();
    expect(log).toEqual(["a asks", "b asks"]);

    // b's token arrives; now both ask on the same turn.
    b.deliver();
    await b1;
    const b2 = barrier.next(b.iterator);
    await turn();
    expect(log).toEqual(["a asks", "b asks", "a asks", "b asks"]);
    a.deliver();
    b.deliver();
    await Promise.all([a2, b2]);
  });

  it("does not wait for a sequence that left", async () => {
    const barrier = new DecodeBarrier();
    const log: string[] = [];
    const a = controlledIterator("a", log);
    barrier.join();
    barrier.join();
    const a1 = barrier.next(a.iterator);
    await turn();
    a.deliver();
    await a1;
    barrier.leave(); // the other sequence finished without asking again
    const a2 = barrier.next(a.iterator);
    await turn();
    expect(log).toEqual(["a asks", "a asks"]);
    a.deliver();
    await a2;
  });
});
