// The decoder's scheduling against a scripted native context: what goes in each batch, the
// pipeline with its consumers, caches kept exact, and failures kept to the jobs they concern.
import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import {
  BatchDecoder,
  countedTokens,
  DecoderSequence,
  imageTokens,
  MAX_TOKENS_AHEAD,
  NO_ADAPTERS,
  type AdapterSet,
  type GenerationSetup,
  type PromptImages,
} from "../../src/engine/BatchDecoder.js";
import type { NativeContext, NativeSampler, NativeSteps } from "../../src/engine/llamaInternals.js";

/** A batch as the fake saw it: per sequence, the tokens and the positions they went to. */
type Batch = Array<{ sequence: number; tokens: number[]; positions: number[] }>;

/**
 * Decodes nothing: it records each batch, and "samples" the token the test's rule gives for the
 * last token decoded at that batch index (by default the next integer).
 */
class FakeNative implements NativeContext {
  readonly batches: Batch[] = [];
  /** The adapters in force for each batch. */
  readonly batchAdapters: Array<readonly unknown[]> = [];
  readonly removed: Array<[number, number, number]> = [];
  readonly copies: Array<[number, number]> = [];
  sampleCalls = 0;
  failNextDecode: Error | undefined;
  /** Decode number n (from 0) waits for what this returns, so a test can act while it is under way. */
  gate: (n: number) => Promise<void> | undefined = () => undefined;
  #decodes = 0;
  next: (token: number) => number = (token) => token + 1;
  #building: Batch = [];
  #outputs: number[] = [];
  #lastBatch: number[] = [];

  initBatch(size: number): void {
    expect(size).toBeGreaterThan(0);
    this.#building = [];
    this.#outputs = [];
  }
  addToBatch(sequence: number, first: number, tokens: Uint32Array, logitIndexes: Uint32Array): Uint32Array {
    this.#building.push({ sequence, tokens: [...tokens], positions: tokens.length ? [first, first + tokens.length - 1] : [] });
    const indexes = new Uint32Array(logitIndexes.length);
    logitIndexes.forEach((index, i) => {
      indexes[i] = this.#outputs.length;
      this.#outputs.push(tokens[index]!);
    });
    return indexes;
  }
  async decodeBatch(): Promise<void> {
    await this.gate(this.#decodes++);
    if (this.failNextDecode) {
      const error = this.failNextDecode;
      this.failNextDecode = undefined;
      throw error;
    }
    this.batches.push(this.#building);
    this.batchAdapters.push(this.adapters);
    this.#lastBatch = this.#outputs;
  }
  sampleToken(batchIndex: number): Promise<number>;
  sampleToken(
    batchIndex: number,
    sampler: NativeSampler,
    probabilities: boolean,
    confidence: boolean,
  ): Promise<[number, number[] | undefined, number | undefined]>;
  async sampleToken(
    batchIndex: number,
    _sampler?: NativeSampler,
    probabilities?: boolean,
  ): Promise<number | [number, number[] | undefined, number | undefined]> {
    this.sampleCalls++;
    const token = this.predict(batchIndex);
    return probabilities === undefined ? token : [token, probabilities ? [token, 0.75, token + 1, 0.25] : undefined, 0.75];
  }
  /** The token "sampled" at an output of the last batch. */
  predict(batchIndex: number): number {
    return this.next(this.#lastBatch[batchIndex]!);
  }
  removeTokenCellsFromSequence(sequence: number, start: number, end: number): boolean {
    this.removed.push([sequence, start, end]);
    return true;
  }
  async copySequenceStateFromOtherSequence(target: number, source: number): Promise<number> {
    this.copies.push([target, source]);
    return 0;
  }
  async restoreCheckpoint(): Promise<boolean> {
    throw new Error("these tests restore no saved state (test/http/promptCache.test.ts does, on a real model)");
  }
  setThreads(): void {}
  /** The adapters each decode ran with (the names the tests give their fake adapters). */
  adapters: readonly unknown[] = [];
  readonly adapterSets: Array<readonly unknown[]> = [];
  setLoras(adapters: readonly unknown[]): void {
    this.adapters = adapters;
    this.adapterSets.push(adapters);
  }
}

/**
 * When the native loop hands its steps over (the C++ hands over every step decoded since the event
 * loop last took them, so a job's change of mind arrives that many steps late): each step at once;
 * two at a time, once the second has decoded; or as decodeAndSample.cpp holds them on a fast
 * model, the first step at once and then LEAD_STEPS (16) at a time.
 */
const DELIVERIES = {
  "each step at once": () => true,
  "two steps at a time": (step: number) => step % 2 === 1,
  "the first step at once, then 16 at a time": (step: number) => step % 16 === 0,
} satisfies Record<string, (step: number) => boolean>;
type Delivery = keyof typeof DELIVERIES;

/** modelhost's native steps as the C++ (src/engine/native/decodeAndSample.cpp) runs them, on the fake context. */
function fakeSteps(native: FakeNative, delivery: Delivery = "each step at once") {
  // `holds`: what each generate call was told it may hold steps for (control[1], µs).
  const calls = {
    decodeAndSample: [] as number[][],
    generate: [] as Array<{ sequences: number[]; maxSteps: number; steps: number }>,
    holds: [] as number[],
  };
  const steps: NativeSteps = {
    decodeAndSample: async (context, indexes) => {
      await context.decodeBatch();
      calls.decodeAndSample.push([...indexes]);
      return Int32Array.from(indexes, (index) => native.predict(index));
    },
    generate: async (context, batchIndexes, _samplers, sequenceIds, positions, endTokens, maxSteps, control, onSteps) => {
      const call = { sequences: [...sequenceIds], maxSteps, steps: 0 };
      calls.generate.push(call);
      calls.holds.push(control[1]!);
      let indexes = batchIndexes;
      let tokens = new Int32Array(0);
      const pending: number[] = [];
      const deliver = () => {
        if (pending.length > 0) onSteps(Int32Array.from(pending.splice(0)));
      };
      try {
        for (let step = 0; ; step++) {
          if (step > 0) {
            if (step > maxSteps || control[0] !== 0 || tokens.some((token) => token < 0 || endTokens.includes(token))) return call.steps;
            context.initBatch(tokens.length);
            indexes = Int32Array.from(
              sequenceIds,
              (id, i) => context.addToBatch(id, positions[i]! + step - 1, Uint32Array.of(tokens[i]!), Uint32Array.of(0))[0]!,
            );
          }
          await context.decodeBatch();
          tokens = Int32Array.from(indexes, (index) => native.predict(index));
          call.steps = step + 1;
          pending.push(...tokens);
          if (DELIVERIES[delivery](step)) deliver();
          await new Promise((resolve) => setImmediate(resolve));
        }
      } finally {
        deliver();
      }
    },
  };
  return { steps, calls };
}

/** A decoder on the fake context with the fake native steps. */
function loopDecoder(delivery: Delivery, holdMs = 16) {
  const native = new FakeNative();
  const { steps, calls } = fakeSteps(native, delivery);
  return { native, calls, decoder: new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs, native: steps }) };
}

const sampler: NativeSampler = { applyConfig: () => undefined, dispose: () => undefined };
const setup = (overrides: Partial<GenerationSetup> = {}): GenerationSetup => ({
  sampler,
  isLast: () => false,
  limit: Infinity,
  ...overrides,
});

async function take(generator: AsyncGenerator<{ token: Token }>, count: number): Promise<number[]> {
  const tokens: number[] = [];
  while (tokens.length < count) {
    const step = await generator.next();
    if (step.done) break;
    tokens.push(step.value.token);
  }
  return tokens;
}

describe("BatchDecoder", () => {
  it("decodes the prompt, then one token per step, each the next step's input; the cache holds what was decoded", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const sequence = new DecoderSequence(0);
    const generator = decoder.generate(sequence, [10, 11, 12] as Token[], setup());
    expect(await take(generator, 3)).toEqual([13, 14, 15]);
    await generator.return();
    expect(native.batches[0]).toEqual([{ sequence: 0, tokens: [10, 11, 12], positions: [0, 2] }]);
    expect(native.batches[1]).toEqual([{ sequence: 0, tokens: [13], positions: [3, 3] }]);
    // The step for the token after 15 had begun when the consumer stopped: 15 is decoded too.
    expect(sequence.tokens).toEqual([10, 11, 12, 13, 14, 15]);
  });

  it("puts the next token of every generating sequence in one batch", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const generators = [0, 1, 2, 3].map((id) => decoder.generate(new DecoderSequence(id), [100 * id] as Token[], setup({ limit: 5 })));
    const replies = await Promise.all(generators.map((generator) => take(generator, 5)));
    expect(replies).toEqual([0, 1, 2, 3].map((id) => [1, 2, 3, 4, 5].map((k) => 100 * id + k)));
    // The first step took the four prompts; each later one the four next tokens.
    expect(native.batches.map((batch) => batch.length)).toEqual([4, 4, 4, 4, 4]);
  });

  it("gives llama.cpp each batch in sequence order, whatever order its jobs came in", async () => {
    // llama.cpp decodes a batch in one pass per run of consecutive sequence ids (a KV stream each).
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const arrival = [3, 1, 2, 0];
    const generators = arrival.map((id) => decoder.generate(new DecoderSequence(id), [100 * id] as Token[], setup({ limit: 4 })));
    const replies = await Promise.all(generators.map((generator) => take(generator, 4)));
    expect(replies).toEqual(arrival.map((id) => [1, 2, 3, 4].map((k) => 100 * id + k)));
    expect(native.batches.length).toBeGreaterThan(1);
    for (const batch of native.batches)
      expect(batch.map((item) => item.sequence)).toEqual([...batch.map((item) => item.sequence)].sort((a, b) => a - b));
  });

  it("decodes sequences of different adapter sets in batches of their own, taking turns, and switches the context's set only when it changes", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const sets: AdapterSet[] = [NO_ADAPTERS, { key: "a@1", adapters: ["a"], scales: [1] }, { key: "a@1", adapters: ["a"], scales: [1] }];
    const sequences = sets.map((set, id) => Object.assign(new DecoderSequence(id), { adapters: set }));
    const generators = sequences.map((sequence) => decoder.generate(sequence, [100 * sequence.id] as Token[], setup({ limit: 4 })));
    const replies = await Promise.all(generators.map((generator) => take(generator, 4)));
    expect(replies).toEqual([0, 1, 2].map((id) => [1, 2, 3, 4].map((k) => 100 * id + k)));
    native.batches.forEach((batch, i) => {
      const ids = batch.map(({ sequence }) => sequence);
      // Never mixed; the two sequences of one set share their batches.
      expect(ids.every((id) => id === 0) || ids.every((id) => id !== 0)).toBe(true);
      expect(native.batchAdapters[i]).toEqual(ids[0] === 0 ? [] : ["a"]);
      if (ids[0] !== 0) expect(ids).toEqual([1, 2]);
    });
    // Turns: four steps each, alternating, so the context's set changed before each batch but the
    // first (no adapters, as the context starts).
    expect(native.batches).toHaveLength(8);
    expect(native.adapterSets).toHaveLength(7);
  });

  it("keeps nothing a sequence holds for a prompt read with other adapters", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const sequence = new DecoderSequence(0);
    await decoder.evaluate(sequence, [1, 2, 3] as Token[]);
    const set: AdapterSet = { key: "a@0.5", adapters: ["a"], scales: [0.5] };
    expect(sequence.commonPrefix([1, 2, 3] as Token[], set)).toBe(0);
    expect(await decoder.keepPrefix(sequence, [1, 2, 3, 4] as Token[], 3, set)).toBe(0);
    expect(sequence.adapters).toBe(set);
    await decoder.evaluate(sequence, [1, 2] as Token[]);
    expect(native.batchAdapters.at(-1)).toEqual(["a"]);
    expect(await decoder.keepPrefix(sequence, [1, 2, 3] as Token[], 3, set)).toBe(2);
  });

  it("stops decoding a generation at its limit and after its last token", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const limited = decoder.generate(new DecoderSequence(0), [0] as Token[], setup({ limit: 3 }));
    expect(await take(limited, 10)).toEqual([1, 2, 3]);
    const ended = decoder.generate(new DecoderSequence(1), [0] as Token[], setup({ isLast: (token) => token === 2 }));
    expect(await take(ended, 10)).toEqual([1, 2]);
    expect(native.batches.flat().filter((entry) => entry.sequence === 0)).toHaveLength(3);
  });

  it("lets a sequence whose consumer does not read sit out the steps once it is MAX_TOKENS_AHEAD behind, while the others go on", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const slow = decoder.generate(new DecoderSequence(0), [0] as Token[], setup());
    const fast = decoder.generate(new DecoderSequence(1), [100] as Token[], setup({ limit: 40 }));
    expect(await take(slow, 1)).toEqual([1]);
    expect(await take(fast, 40)).toEqual(Array.from({ length: 40 }, (_, i) => 101 + i));
    // The slow one's tokens 2…17 were sampled and wait; nothing past them was decoded.
    expect(
      native.batches
        .flat()
        .filter((entry) => entry.sequence === 0)
        .map((entry) => entry.tokens[0]),
    ).toEqual(Array.from({ length: MAX_TOKENS_AHEAD + 1 }, (_, i) => i));
    expect(await take(slow, MAX_TOKENS_AHEAD + 2)).toEqual(Array.from({ length: MAX_TOKENS_AHEAD + 2 }, (_, i) => 2 + i));
    await slow.return();
  });

  it("reads a long prompt in chunks in the room the generating sequences leave", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 4, threads: 1, holdMs: 16 });
    const generating = decoder.generate(new DecoderSequence(0), [0] as Token[], setup({ limit: 4 }));
    await take(generating, 1);
    const prompt = new DecoderSequence(1);
    const reading = decoder.evaluate(prompt, Array.from({ length: 7 }, (_, i) => 50 + i) as Token[]);
    await take(generating, 3);
    await reading;
    expect(prompt.tokens).toEqual([50, 51, 52, 53, 54, 55, 56]);
    for (const batch of native.batches) expect(batch.reduce((sum, entry) => sum + entry.tokens.length, 0)).toBeLessThanOrEqual(4);
    // Generation tokens go first; the prompt fills what is left of each batch.
    const shared = native.batches.find((batch) => batch.length === 2)!;
    expect(shared[0]!.sequence).toBe(0);
    expect(shared[1]).toMatchObject({ sequence: 1, tokens: [50, 51, 52] });
  });

  it("keeps the cached prefix, drops the rest, and copies a sequence between steps", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const first = new DecoderSequence(0);
    await decoder.evaluate(first, [1, 2, 3, 4] as Token[]);
    expect(await decoder.keepPrefix(first, [1, 2, 9, 9] as Token[])).toBe(2);
    expect(native.removed).toEqual([[0, 2, -1]]);
    expect(first.tokens).toEqual([1, 2]);
    // At most what the caller allows: the last prompt token is always decoded again.
    expect(await decoder.keepPrefix(first, [1, 2] as Token[], 1)).toBe(1);
    const second = new DecoderSequence(1);
    await decoder.copy(second, first);
    expect(native.copies).toEqual([[1, 0]]);
    expect(second.tokens).toEqual([1]);
  });

  it("places an M-RoPE image by its positions, counts it by its tokens, and cuts only at its edges", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    // Qwen2-VL's 3 × 2 merged patches: 6 tokens (KV cells) at 3 positions, so 3 pseudo-tokens.
    const pseudo = imageTokens("abcdef0", 3);
    const evaluated: Array<[number, number]> = [];
    const images: PromptImages = {
      at: (token) =>
        token === pseudo[0] ? { length: 3, tokens: 6, evaluate: async (id, position) => void evaluated.push([id, position]) } : undefined,
    };
    const prompt = [1, 2, ...pseudo, 3, 4] as Token[];
    const sequence = new DecoderSequence(0);
    await decoder.evaluate(sequence, prompt, undefined, images);
    expect(evaluated).toEqual([[0, 2]]);
    // The text after it goes on 3 positions later, not 6.
    expect(native.batches.flat()).toEqual([
      { sequence: 0, tokens: [1, 2], positions: [0, 1] },
      { sequence: 0, tokens: [3, 4], positions: [5, 6] },
    ]);
    expect(countedTokens(prompt, prompt.length, images)).toBe(2 + 6 + 2);
    expect(countedTokens(prompt, 5, images)).toBe(8);
    expect(countedTokens(prompt, prompt.length, undefined)).toBe(7);
    // A cut inside the image moves back to its start: from position 2 on, which removes every one
    // of its cells (mtmd decodes them all at its first position), and nothing before it.
    expect(await decoder.keepPrefix(sequence, prompt, 4)).toBe(2);
    expect(native.removed).toEqual([[0, 2, -1]]);
  });

  it("waits for the step under way before a stopped generation returns", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const sequence = new DecoderSequence(0);
    let open!: () => void;
    const blocked = new Promise<void>((resolve) => (open = resolve));
    // The prompt's step goes through; the next one, started as soon as token 1 is handed over, waits.
    native.gate = (n) => (n === 1 ? blocked : undefined);
    const generator = decoder.generate(sequence, [0] as Token[], setup());
    await take(generator, 1);
    let returned = false;
    const stopping = generator.return().then(() => (returned = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(returned).toBe(false);
    open();
    await stopping;
    expect(sequence.tokens).toEqual([0, 1]);
  });

  it("checks a draft in the step's decode: keeps the tokens the model wrote, drops the rest from the cache, and writes as it would without", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const sequence = new DecoderSequence(0);
    // The fake writes token + 1: after 11, a draft of 12, 13, 99 has its first two accepted.
    const drafts = [[12, 13, 99], [], [16, 17, 18, 19]];
    const records: Array<[number, number]> = [];
    const drafter = {
      draft: (_history: readonly Token[], _next: Token, room: number) => (drafts.shift() ?? []).slice(0, room) as Token[],
      record: (drafted: number, accepted: number) => void records.push([drafted, accepted]),
      idle: () => 0,
    };
    const generator = decoder.generate(sequence, [9, 10] as Token[], setup({ limit: 9, drafter }));
    expect(await take(generator, 9)).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19]);
    // The prompt; 11 with its draft (two accepted, then 14 sampled where 99 was drafted); 14
    // alone; 15 with a draft of four cut to the room the limit leaves (three), all accepted, and
    // 19 sampled after them.
    expect(native.batches.map((batch) => batch.map(({ tokens }) => tokens))).toEqual([
      [[9, 10]],
      [[11, 12, 13, 99]],
      [[14]],
      [[15, 16, 17, 18]],
    ]);
    expect(records).toEqual([
      [3, 2],
      [3, 3],
    ]);
    // The rejected 99 left the cache at once; the cache holds what was written, no more.
    expect(native.removed).toEqual([[0, 5, -1]]);
    expect(sequence.tokens).toEqual([9, 10, 11, 12, 13, 14, 15, 16, 17, 18]);
    await generator.return();
  });

  it("fails the jobs of a batch whose decode failed and clears their caches; a failed sample fails only its job", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const a = new DecoderSequence(0);
    await decoder.evaluate(a, [1, 2] as Token[]);
    native.failNextDecode = new Error("no KV slot");
    await expect(decoder.evaluate(a, [3] as Token[])).rejects.toThrow("no KV slot");
    expect(a.tokens).toEqual([]);

    native.next = (token) => (token === 7 ? -1 : token + 1);
    const failing = decoder.generate(new DecoderSequence(1), [7] as Token[], setup());
    const fine = decoder.generate(new DecoderSequence(2), [20] as Token[], setup({ limit: 2 }));
    await expect(take(failing, 1)).rejects.toThrow(/could not sample/);
    expect(await take(fine, 2)).toEqual([21, 22]);
  });

  it("drops a job whose request was aborted before its step", async () => {
    const native = new FakeNative();
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16 });
    const controller = new AbortController();
    controller.abort(new Error("client left"));
    await expect(decoder.evaluate(new DecoderSequence(0), [1, 2, 3] as Token[], controller.signal)).rejects.toThrow("client left");
    expect(native.batches).toEqual([]);
  });

  it("samples plain generation steps in the native decode-and-sample call, and logprob steps after it", async () => {
    const native = new FakeNative();
    const { steps, calls } = fakeSteps(native);
    const decoder = new BatchDecoder(native, { batchSize: 8, threads: 1, holdMs: 16, native: steps });
    const plain = decoder.generate(new DecoderSequence(0), [0] as Token[], setup({ limit: 3 }));
    const withLogprobs = decoder.generate(new DecoderSequence(1), [100] as Token[], setup({ limit: 3, metadata: { probabilities: true } }));
    const sampled: Array<{ token: Token }> = [];
    const collect = async () => {
      for await (const step of withLogprobs) sampled.push(step);
    };
    const [plainTokens] = await Promise.all([take(plain, 3), collect()]);
    expect(plainTokens).toEqual([1, 2, 3]);
    expect(sampled.map((step) => step.token)).toEqual([101, 102, 103]);
    expect(sampled[0]).toMatchObject({
      confidence: 0.75,
      probabilities: new Map([
        [101, 0.75],
        [102, 0.25],
      ]),
    });
    expect(calls.decodeAndSample).toHaveLength(3);
    // Never in the loop: a batch with a logprob step is not all native samples.
    expect(calls.generate).toEqual([]);
    // node-llama-cpp's sampleToken only for the steps that asked for probabilities.
    expect(native.sampleCalls).toBe(3);
  });

  for (const delivery of Object.keys(DELIVERIES) as Delivery[]) {
    describe(`the native loop, handing over ${delivery}`, () => {
      it("decodes a generation step after step in one call, each token the next input, up to its limit, holding steps as long as it was set to", async () => {
        const { native, calls, decoder } = loopDecoder(delivery, 7.5);
        const sequence = new DecoderSequence(0);
        const generator = decoder.generate(sequence, [10, 11] as Token[], setup({ limit: 5 }));
        expect(await take(generator, 10)).toEqual([12, 13, 14, 15, 16]);
        expect(calls.generate).toEqual([{ sequences: [0], maxSteps: 4, steps: 5 }]);
        expect(calls.holds).toEqual([7500]);
        expect(native.batches.map((batch) => batch[0])).toEqual([
          { sequence: 0, tokens: [10, 11], positions: [0, 1] },
          ...[12, 13, 14, 15].map((token, i) => ({ sequence: 0, tokens: [token], positions: [2 + i, 2 + i] })),
        ]);
        expect(sequence.tokens).toEqual([10, 11, 12, 13, 14, 15]);
      });

      it("stops after an end token, and at once for new work, which joins the next batch", async () => {
        const { native, calls, decoder } = loopDecoder(delivery);
        const ended = decoder.generate(
          new DecoderSequence(0),
          [0] as Token[],
          setup({ isLast: (token) => token === 3, endTokens: [3 as Token] }),
        );
        expect(await take(ended, 10)).toEqual([1, 2, 3]);
        expect(calls.generate.at(-1)).toMatchObject({ sequences: [0], steps: 3 });

        const long = decoder.generate(new DecoderSequence(1), [100] as Token[], setup({ limit: 30 }));
        expect(await take(long, 2)).toEqual([101, 102]);
        const late = decoder.generate(new DecoderSequence(2), [200] as Token[], setup({ limit: 3 }));
        const [first, second] = await Promise.all([take(long, 28), take(late, 3)]);
        expect(first).toEqual(Array.from({ length: 28 }, (_, i) => 103 + i));
        expect(second).toEqual([201, 202, 203]);
        // The late one's prompt shared a batch with the running generation.
        expect(native.batches.some((batch) => batch.length === 2 && batch.some((entry) => entry.tokens[0] === 200))).toBe(true);
        expect(calls.generate.some((call) => call.sequences.length === 2)).toBe(true);
      });

      it("tells a generation each token it sampled, and samples the token after one it answers true for in a step of its own", async () => {
        const { native, calls, decoder } = loopDecoder(delivery);
        // Each token with the number of decodes so far: the token after a stop had nothing decoded past it.
        const seen: Array<[number, number]> = [];
        const sampled = (token: Token) => {
          seen.push([token, native.batches.length]);
          return token === 3;
        };
        const generator = decoder.generate(new DecoderSequence(0), [0] as Token[], setup({ limit: 8, endTokens: [3 as Token], sampled }));
        expect(await take(generator, 10)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
        expect(seen.map(([token]) => token)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
        expect(seen.filter(([token]) => token === 3 || token === 4)).toEqual([
          [3, 3],
          [4, 4],
        ]);
        // The loop stopped after 3 (an end token for it), 4 came from a step of its own, then a loop again.
        expect(calls.generate.map((call) => call.steps)).toEqual([3, 4]);
        expect(calls.decodeAndSample).toHaveLength(1);
      });

      it("keeps what it decoded for a consumer that stopped in the cache, and returns once the loop is over", async () => {
        const { native, decoder } = loopDecoder(delivery);
        const sequence = new DecoderSequence(0);
        const generator = decoder.generate(sequence, [0] as Token[], setup());
        expect(await take(generator, 3)).toEqual([1, 2, 3]);
        await generator.return();
        await decoder.idle();
        // Every token decoded is in the cache, in order, with nothing decoded twice.
        expect(sequence.tokens).toEqual(Array.from({ length: sequence.tokens.length }, (_, i) => i));
        const decoded = native.batches.flat().flatMap((entry) => entry.tokens);
        expect(decoded).toEqual(sequence.tokens);
        // The decoder goes on with others.
        expect(await take(decoder.generate(new DecoderSequence(1), [50] as Token[], setup({ limit: 2 })), 2)).toEqual([51, 52]);
      });

      it("feeds a slow consumer what the loop decoded for it, in order, and lets it sit out past MAX_TOKENS_AHEAD", async () => {
        const { decoder } = loopDecoder(delivery);
        const sequence = new DecoderSequence(0);
        const generator = decoder.generate(sequence, [0] as Token[], setup());
        expect(await take(generator, 1)).toEqual([1]);
        await new Promise((resolve) => setTimeout(resolve, 50));
        const decodedWhileAway = sequence.tokens.length;
        expect(decodedWhileAway).toBeGreaterThanOrEqual(MAX_TOKENS_AHEAD);
        // Past it by at most what the loop decodes before the event loop hears: one hand-over of 16 and a step.
        expect(decodedWhileAway).toBeLessThanOrEqual(MAX_TOKENS_AHEAD + 17);
        expect(await take(generator, 40)).toEqual(Array.from({ length: 40 }, (_, i) => 2 + i));
        await generator.return();
        expect(sequence.tokens).toEqual(Array.from({ length: sequence.tokens.length }, (_, i) => i));
      });

      it("fails the generations of a loop whose decode failed, and clears their caches", async () => {
        const { native, decoder } = loopDecoder(delivery);
        const sequence = new DecoderSequence(0);
        native.gate = (n) => {
          if (n === 4) native.failNextDecode = new Error("Eval has failed");
          return undefined;
        };
        const generator = decoder.generate(sequence, [0] as Token[], setup());
        await expect(take(generator, 10)).rejects.toThrow("Eval has failed");
        expect(sequence.tokens).toEqual([]);
        expect(await take(decoder.generate(new DecoderSequence(1), [50] as Token[], setup({ limit: 2 })), 2)).toEqual([51, 52]);
      });
    });
  }
});
