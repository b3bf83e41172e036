// Workload 1, decode: N concurrent streams on N slots, each generating `tokens` tokens after a short
// chat prompt; aggregate tokens/s (all tokens over the wall time) and per-stream tokens/s (each
// stream's decode rate, median over streams), median over rounds. With one stream, llama-bench's
// tg figure (`-p 0`), in turn with the servers, is the raw engine's. Then the most streams again with
// both servers' KV cache quantized (`cacheTypes`, --cache-type-k and --cache-type-v): its speed, and
// the memory it saves against the f16 run.
import type { KvCacheType } from "../src/core/KvCacheType.js";
import { benchChoices } from "./choices.js";
import { timeHttpStream } from "./httpStream.js";
import { llamaBenchTg } from "./llamaCpp.js";
import { decodeRun, names, type TargetKey } from "./metrics.js";
import { aggregateRate, decodeRate, median, type StreamSample } from "./stats.js";
import { inTurn, withTargets, type ModelRun, type Target } from "./targets.js";

const PROMPTS = [
  "Tell me a long story about a lighthouse keeper who finds a message in a bottle.",
  "Explain, step by step, how a steam engine turns heat into motion.",
  "Write a detailed travel guide to a city that does not exist.",
  "Describe the rules of a board game you invent, with examples of play.",
];

export interface DecodeOptions {
  concurrencies: readonly number[];
  tokens: number;
  rounds: number;
  /** Also time n=4 choices against n=1 on modelhost (bench/choices.ts), with 4 streams. */
  choices: boolean;
  /** KV cache types to run the most streams with again (q8_0 in the full run). */
  cacheTypes: readonly KvCacheType[];
}

/** Short chat prompts plus generated tokens fit; the n-choices table's ~900-token prompt too. */
const CONTEXT_SIZE = 1024;

/** Streams each target serves before it is measured: the first allocate buffers, page the weights in and let V8 optimise modelhost's JavaScript. */
const WARM_UP_STREAMS = 4;
/**
 * Tokens of each warm-up stream: enough for V8 to have compiled the per-token path (a few hundred
 * tokens in all), few enough that a real-shape model (~30 tokens/s) does not spend minutes on it.
 */
const WARM_UP_TOKENS = 32;

async function streams(target: Target, model: string, count: number, tokens: number): Promise<{ samples: StreamSample[]; wallMs: number }> {
  const started = performance.now();
  const samples = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      timeHttpStream(target.url, {
        model,
        messages: [{ role: "user", content: `${i + 1}. ${PROMPTS[i % PROMPTS.length]!}` }],
        max_tokens: tokens,
        temperature: 0,
        ignore_eos: true,
      }),
    ),
  );
  return { samples, wallMs: performance.now() - started };
}

export async function benchDecode(run: ModelRun, options: DecodeOptions): Promise<void> {
  for (const count of options.concurrencies) await decodeAt(run, options, count);
  // Servers of their own, so that its long prompts count in no decode run's peak memory. About 900
  // prompt tokens with the test vocabulary: most of the 1,024-token context.
  if (options.choices)
    await withTargets(run, "choices", { parallel: 4, contextSize: CONTEXT_SIZE, memory: false }, (targets) =>
      benchChoices(targets[0]!.url, run.preset, { runs: options.rounds, promptRepeats: 11 }),
    );
  const most = Math.max(...options.concurrencies);
  for (const cacheType of options.cacheTypes) {
    const quantizedWorkload = await decodeAt(run, options, most, cacheType);
    const lines: string[] = [];
    for (const key of ["modelhost", "llama_server"] as const) {
      const f16 = run.figures.get(names.memory(decodeWorkload(most), key));
      const quantized = run.figures.get(names.memory(quantizedWorkload, key));
      if (f16 === undefined || quantized === undefined) continue;
      run.figures.set(names.memorySaving(quantizedWorkload, key), f16 - quantized);
      lines.push(`${key} ${(f16 - quantized).toFixed(0)} MiB`);
    }
    if (lines.length > 0) console.log(`peak RSS saved by a ${cacheType} KV cache, ${most} streams: ${lines.join(", ")}`);
  }
}

/** The workload name a decode run's memory is recorded under: `decode_c16`, `decode_c16_kv_q8_0`. */
function decodeWorkload(count: number, cacheType?: KvCacheType): string {
  return `decode_${decodeRun(count, cacheType)}`;
}

/** `count` streams on `count` slots, the KV cache in `cacheType` (default f16); resolves to the run's workload name. */
async function decodeAt(run: ModelRun, options: DecodeOptions, count: number, cacheType?: KvCacheType): Promise<string> {
  const { figures } = run;
  const workload = decodeWorkload(count, cacheType);
  await withTargets(run, workload, { parallel: count, contextSize: CONTEXT_SIZE, cacheType }, async (targets) => {
    // The chat prompt as modelhost counts it, for llama-bench's figure at that depth.
    let promptTokens = 0;
    for (const target of targets) {
      for (let i = 0; i < WARM_UP_STREAMS; i++) {
        const [sample] = (await streams(target, run.preset, 1, WARM_UP_TOKENS)).samples;
        if (target.key === "modelhost") promptTokens = sample!.promptTokens ?? 0;
      }
      await streams(target, run.preset, count, WARM_UP_TOKENS);
    }
    const rounds = new Map<TargetKey, { samples: StreamSample[]; wallMs: number }[]>(targets.map((t) => [t.key, []]));
    const raw: number[][] = [];
    for (let round = 0; round < options.rounds; round++) {
      if (count === 1 && cacheType === undefined && run.llamaBench) {
        const depths = [0, promptTokens];
        raw.push(
          await llamaBenchTg(run.llamaBench, run.modelPath, { threads: run.threads, tokens: options.tokens, repetitions: 1, depths }),
        );
      }
      const results = await inTurn(targets, round, (target) => streams(target, run.preset, count, options.tokens));
      for (const [key, result] of results) rounds.get(key)!.push(result);
    }
    console.log(
      `\n### ${run.preset}: decode, ${count} stream(s) on ${count} slot(s), ${options.tokens} tokens, KV cache ${cacheType ?? "f16"}, median of ${options.rounds}\n`,
    );
    console.log("| | aggregate tok/s | per-stream tok/s | TTFT ms |");
    console.log("| --- | ---: | ---: | ---: |");
    for (const target of targets) {
      const list = rounds.get(target.key)!;
      const aggregate = median(list.map((r) => aggregateRate(r.samples, r.wallMs)));
      const perStream = median(list.map((r) => median(r.samples.map(decodeRate))));
      figures.set(names.decodeAggregate(count, target.key, cacheType), aggregate);
      figures.set(names.decodePerStream(count, target.key, cacheType), perStream);
      const ttft = median(list.flatMap((r) => r.samples.map((s) => s.ttftMs)));
      console.log(`| ${target.label} | ${aggregate.toFixed(1)} | ${perStream.toFixed(1)} | ${ttft.toFixed(1)} |`);
    }
    if (raw.length > 0) {
      figures.set(names.decodeRaw(), median(raw.map(([empty]) => empty!)));
      figures.set(names.decodeRawAtPrompt(), median(raw.map(([, atPrompt]) => atPrompt!)));
      console.log(`| llama-bench -p 0 -n ${options.tokens} | ${figures.get(names.decodeRaw())!.toFixed(1)} | | |`);
      console.log(`| llama-bench, also -d ${promptTokens} | ${figures.get(names.decodeRawAtPrompt())!.toFixed(1)} | | |`);
    }
    figures.ratio(
      names.decodeRatio(count, cacheType),
      names.decodeAggregate(count, "modelhost", cacheType),
      names.decodeAggregate(count, "llama_server", cacheType),
    );
    const ratio = figures.get(names.decodeRatio(count, cacheType));
    if (ratio !== undefined) console.log(`\nmodelhost ÷ llama-server, aggregate: ${ratio.toFixed(3)}×`);
  });
  return workload;
}
