import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import { SequenceLease } from "../../src/engine/SequenceLease.js";

const text = (value: string): ChatEvent => ({ type: "text", text: value });

/** A generator whose single step waits for `step` to resolve, as a decode would; logs what happened. */
function decoding(log: string[], step: Promise<void>) {
  return (async function* (): AsyncGenerator<ChatEvent, void, undefined> {
    try {
      log.push("decode started");
      await step;
      log.push("decode finished");
      yield text("a");
      yield text("b");
    } finally {
      log.push("generator closed");
    }
  })();
}

describe("SequenceLease", () => {
  it("releases on abort a stream nobody ever iterated", async () => {
    const log: string[] = [];
    const controller = new AbortController();
    new SequenceLease(decoding(log, Promise.resolve()), () => log.push("released"), controller.signal);
    expect(log).toEqual([]);
    controller.abort();
    await expect.poll(() => log).toEqual(["released"]);
  });

  it("releases at once when the signal was already aborted", async () => {
    const log: string[] = [];
    const controller = new AbortController();
    controller.abort();
    new SequenceLease(decoding(log, Promise.resolve()), () => log.push("released"), controller.signal);
    await expect.poll(() => log).toEqual(["released"]);
  });

  it("waits for a read in flight before releasing, never mid-decode", async () => {
    const log: string[] = [];
    const controller = new AbortController();
    let finishStep!: () => void;
    const step = new Promise<void>((resolve) => (finishStep = resolve));
    const lease = new SequenceLease(decoding(log, step), () => log.push("released"), controller.signal);
    const read = lease.next();
    await expect.poll(() => log).toEqual(["decode started"]);
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(log).toEqual(["decode started"]);
    finishStep();
    expect(await read).toEqual({ done: false, value: text("a") });
    await expect.poll(() => log).toEqual(["decode started", "decode finished", "generator closed", "released"]);
    // The consumer that is still there sees the end, and nothing is released twice.
    expect(await lease.next()).toEqual({ done: true, value: undefined });
    await lease.return();
    expect(log.filter((entry) => entry === "released")).toHaveLength(1);
  });

  it("releases once when its consumer closes it and the signal aborts later", async () => {
    const log: string[] = [];
    const controller = new AbortController();
    const lease = new SequenceLease(decoding(log, Promise.resolve()), () => log.push("released"), controller.signal);
    expect(await lease.next()).toEqual({ done: false, value: text("a") });
    await lease.return();
    controller.abort();
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(log).toEqual(["decode started", "decode finished", "generator closed", "released"]);
  });
});
