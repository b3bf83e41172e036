// npm run bench [-- --quick] [--models bench,tiny] [--embeddings embed-tiny] [--llama-server build|PATH]
//                  [--workloads decode,prefill,agent,load,embeddings,vision,gateway] [--threads 2] [--engine auto]
//                  [--runs N] [--tokens N] [--concurrency 1,4,8,16] [--ttft-target MS] [--itl-target MS]
//                  [--kv-types q8_0] [--baseline DIR] [--json FILE]
//
// Issue 32's workloads, each against llama-server (--llama-server) on the same file, threads,
// context and slots, in the same run, the servers taking turns (bench/targets.ts), each reporting
// modelhost's ratio to llama-server:
//   decode (bench/decode.ts)          every model of --models; the first's most streams again with
//                                     each of --kv-types (q8_0; none with --quick) as its KV cache;
//   prefill, agent, load              the first model of --models;
//   embeddings (bench/embeddings.ts)  every model of --embeddings;
//   vision (bench/vision.ts)          the first model of --models, with a LLaVA-1.5-shaped projector;
//   gateway (bench/gateway.ts)        issue 34, not in the default list, modelhost alone: the first model
//                                     on 3 workers behind a gateway, the prompt cache's share with affinity
//                                     and with round-robin routing; and what the gateway adds to streams
//                                     from a fake upstream;
//   memory                            each server's peak RSS per model and workload (servers start afresh per
//                                     workload), and the KV cache's size for its slots × context.
// Real shapes: --models qwen2.5-0.5b-q4_k_m,llama3.2-1b-q4_k_m --embeddings nomic-embed-f16.
//
// Counts, full run (--quick in brackets), sized from the real shapes' speed on 2 cores (Qwen2.5-0.5B
// Q4_K_M: ~29 tok/s decoding one stream, ~160 prompt tok/s; Llama-3.2-1B Q4_K_M ~16 tok/s;
// nomic-embed F16 ~540 tok/s) to keep a full run of the three under an hour; one round each (--runs N
// for more). The issue's agents (10 turns, 100 generated) took 42 of a 77-minute run, llama-server
// about 21 of them: it decodes every returning turn again but the system prompt. 8 turns of 64
// tokens keep its pattern (8 conversations on 4 slots, every turn evicted) at half the time.
//   decode      1, 4, 8, 16 streams (1, 4), 128 tokens (64) each; 16 again with a q8_0 KV cache (none);
//   prefill     512, 2,048, 4,096-token prompts (512, 2,048), and a stream beside the longest;
//   agent       8 conversations on 4 slots (4 on 2), 8 turns (3), ~1,500-token system prompt, ~150 tokens a turn, 64 generated (32);
//   load        4 slots, 16 requests a rate (10), prompts of 128/256/512/1,024 tokens (128/512), 64 generated (32),
//               rates 0.5×, 1× and 1.5× the saturation estimated from decode ×4 and prefill p512;
//   embeddings  320 passages (128) of ~200 tokens in batches of 64, 4 slots;
//   vision      one 448 × 448 image a request: TTFT of 4 (2) one at a time, images/s of 4 (2) at once;
//   gateway     8 conversations (4) × 6 turns (3), ~500-token system prompt, ~100 tokens a turn, 48
//               generated (16), per routing; 64 streams of 32 chunks back to back, 2,560 requests (640)
//               a round, and 20 ms apart, 640 requests (128); one stream, 400 requests (100); 3 rounds each.
// minutesTaken in the JSON gives each workload's minutes.
// Writes a Markdown summary, bench/results/latest.json (--quick: quick.json, not committed) with
// stable names per figure (bench/metrics.ts) and a chart beside it (.svg): aggregate tok/s against
// concurrency, TTFT p50 per agent turn.
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import type { KvCacheType } from "../src/core/KvCacheType.js";
import { loadLlama, type EngineChoice } from "../src/engine/loadLlama.js";
import { testModelPath, type CachedTestModelPreset } from "../test/support/testModels.js";
import { benchAgents } from "./agents.js";
import { svgChart, type Series } from "./chart.js";
import { benchDecode } from "./decode.js";
import { benchEmbeddings } from "./embeddings.js";
import { benchGateway } from "./gateway.js";
import { kvCacheBytesPerToken, kvCacheScale } from "./kvCache.js";
import { llamaCppTools } from "./llamaCpp.js";
import { benchLoad } from "./load.js";
import { ModelFigures, names, summaryTable, type TargetKey } from "./metrics.js";
import { benchPrefill } from "./prefill.js";
import { benchVision } from "./vision.js";
import { PromptText } from "./promptText.js";
import { baselineCheckout } from "./servers.js";
import type { ModelRun, TargetSetup } from "./targets.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    models: { type: "string", default: "bench,tiny" },
    embeddings: { type: "string", default: "embed-tiny" },
    workloads: { type: "string", default: "decode,prefill,agent,load,embeddings,vision" },
    runs: { type: "string" },
    tokens: { type: "string" },
    concurrency: { type: "string" },
    threads: { type: "string" },
    engine: { type: "string", default: "auto" },
    "llama-server": { type: "string" },
    "ttft-target": { type: "string" },
    "itl-target": { type: "string" },
    "kv-types": { type: "string" },
    baseline: { type: "string" },
    json: { type: "string" },
  },
});

const quick = args.quick;
const list = (text: string) =>
  text
    .split(",")
    .map((each) => each.trim())
    .filter(Boolean);
const numbers = (text: string) => list(text).map(Number);
const workloads = new Set(list(args.workloads));
const rounds = Number(args.runs ?? 1);
const counts = {
  concurrencies: numbers(args.concurrency ?? (quick ? "1,4" : "1,4,8,16")),
  tokens: Number(args.tokens ?? (quick ? 64 : 128)),
  prefill: quick ? [512, 2048] : [512, 2048, 4096],
  agent: quick
    ? { conversations: 4, slots: 2, turns: 3, systemTokens: 1500, turnTokens: 150, generated: 32 }
    : { conversations: 8, slots: 4, turns: 8, systemTokens: 1500, turnTokens: 150, generated: 64 },
  load: { slots: 4, requests: quick ? 10 : 16, promptMix: quick ? [128, 512] : [128, 256, 512, 1024], generated: quick ? 32 : 64 },
  embeddings: { passages: quick ? 128 : 320, passageTokens: 200, batch: 64, slots: 4 },
  vision: { sequential: quick ? 2 : 4, concurrent: quick ? 2 : 4, side: 448 },
  gateway: {
    affinity: quick
      ? { workers: 3, conversations: 4, turns: 3, systemTokens: 500, turnTokens: 100, generated: 16, contextSize: 2048 }
      : { workers: 3, conversations: 8, turns: 6, systemTokens: 500, turnTokens: 100, generated: 48, contextSize: 2048 },
    overhead: {
      streams: 64,
      upstreams: [
        { intervalMs: 0, requests: quick ? 640 : 2560 },
        { intervalMs: 20, requests: quick ? 128 : 640 },
        // One stream at a time: the gateway's own latency, without the queue 64 streams make.
        { intervalMs: 0, requests: quick ? 100 : 400, streams: 1 },
      ],
      rounds: 3,
      chunks: 32,
    },
  },
};
/** KV cache types the first model's widest decode runs with again: memory saved and speed. */
// Checked here, by the size the memory figures need, rather than after the runs that use them.
const cacheTypes = list(args["kv-types"] ?? (quick ? "" : "q8_0")).map((type) => {
  kvCacheScale(type as KvCacheType);
  return type as KvCacheType;
});
const jsonFile = path.resolve(args.json ?? path.join(import.meta.dirname, "results", quick ? "quick.json" : "latest.json"));

const llamaCpp = args["llama-server"] ? await llamaCppTools(args["llama-server"]) : undefined;
const baseline = args.baseline ? await baselineCheckout(path.resolve(args.baseline)) : undefined;
if (baseline) console.log(`${baseline.name}: ${baseline.dir}; serve's flags since: ${baseline.flagChanges.join(", ") || "the same"}`);
const setup: TargetSetup = { engine: args.engine, llamaServer: llamaCpp?.server, baseline };
const { llama, backend, threads } = await loadLlama({
  engine: args.engine as EngineChoice,
  gpu: "off",
  threads: args.threads ? Number(args.threads) : undefined,
});

const figures = new Map<string, ModelFigures>();

/** Runs `body` with the model in a folder of its own and its tokenizer loaded. */
async function withModel(preset: string, body: (run: ModelRun, prompts: PromptText) => Promise<void>): Promise<void> {
  const modelPath = await testModelPath(preset as CachedTestModelPreset);
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-"));
  await symlink(modelPath, path.join(modelsDir, `${preset}.gguf`));
  const prompts = await PromptText.load(llama, modelPath);
  if (!figures.has(preset)) figures.set(preset, new ModelFigures());
  try {
    const kvBytesPerToken = await kvCacheBytesPerToken(modelPath);
    await body(
      { preset, modelPath, modelsDir, threads, setup, llamaBench: llamaCpp?.bench, kvBytesPerToken, figures: figures.get(preset)! },
      prompts,
    );
  } finally {
    await prompts.dispose();
    await rm(modelsDir, { recursive: true, force: true });
  }
}

const started = performance.now();
/** Minutes each workload took, per model, both servers and llama.cpp's tools included: what sizes the counts. */
const minutesTaken: Record<string, number> = {};
async function timed(what: string, body: () => Promise<void>): Promise<void> {
  const start = performance.now();
  await body();
  minutesTaken[what] = Number(((performance.now() - start) / 60_000).toFixed(1));
  console.log(`
(${what}: ${minutesTaken[what]} minutes)`);
}

const models = list(args.models);
for (const [index, preset] of models.entries()) {
  await withModel(preset, async (run, prompts) => {
    if (workloads.has("decode"))
      await timed(`${preset} decode`, () =>
        benchDecode(run, {
          concurrencies: counts.concurrencies,
          tokens: counts.tokens,
          rounds,
          choices: !quick,
          cacheTypes: index === 0 ? cacheTypes : [],
        }),
      );
    if (index > 0) return;
    if (workloads.has("prefill")) await timed(`${preset} prefill`, () => benchPrefill(run, prompts, { lengths: counts.prefill, rounds }));
    if (workloads.has("agent"))
      await timed(`${preset} agent`, () =>
        benchAgents(run, prompts, { ...counts.agent, contextSize: Math.min(6144, 1500 + counts.agent.turns * 300 + 512) }),
      );
    if (workloads.has("load"))
      await timed(`${preset} load`, () =>
        benchLoad(run, prompts, {
          ...counts.load,
          rateFactors: [0.5, 1, 1.5],
          targets: {
            ...(args["ttft-target"] ? { ttftMs: Number(args["ttft-target"]) } : {}),
            ...(args["itl-target"] ? { itlMs: Number(args["itl-target"]) } : {}),
          },
          seed: 32,
        }),
      );
    if (workloads.has("vision")) await timed(`${preset} vision`, () => benchVision(run, counts.vision));
    if (workloads.has("gateway")) await timed(`${preset} gateway`, () => benchGateway(run, prompts, counts.gateway));
  });
}
if (workloads.has("embeddings"))
  for (const preset of list(args.embeddings))
    await withModel(preset, (run, prompts) => timed(`${preset} embeddings`, () => benchEmbeddings(run, prompts, counts.embeddings)));
await llama.dispose();
const minutes = (performance.now() - started) / 60_000;

console.log(
  `\n## Summary — modelhost ÷ llama-server; ${backend} llama.cpp, ${threads} threads, ${minutes.toFixed(1)} minutes${quick ? ", --quick" : ""}\n`,
);
console.log(summaryTable(figures));

const targetsShown: Array<[TargetKey, string]> = [
  ["modelhost", "modelhost"],
  ["llama_server", "llama-server"],
  ...(baseline ? [["baseline", baseline.name] as [TargetKey, string]] : []),
];
const throughput: Series[] = [...figures].flatMap(([preset, f]) =>
  targetsShown.map(([key, label]) => ({
    name: `${label}, ${preset}`,
    points: counts.concurrencies.flatMap((c) => {
      const value = f.get(names.decodeAggregate(c, key));
      return value === undefined ? [] : [[c, value] as const];
    }),
  })),
);
const agentModel = figures.get(models[0]!);
const perTurn: Series[] = targetsShown.map(([key, label]) => ({
  name: label,
  points: Array.from({ length: counts.agent.turns }, (_, i) => i + 1).flatMap((turn) => {
    const value = agentModel?.get(names.agentTurn(turn, "ttft_p50", key));
    return value === undefined ? [] : [[turn, value] as const];
  }),
}));
const header = {
  date: new Date().toISOString(),
  quick,
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memoryGiB: Math.round(os.totalmem() / 2 ** 30), kernel: os.release() },
  backend,
  threads,
  llamaServer: llamaCpp?.server,
  baseline: baseline ? { name: baseline.name, flagChanges: baseline.flagChanges } : undefined,
  minutes: Number(minutes.toFixed(1)),
  minutesTaken,
  counts: { rounds, ...counts, cacheTypes },
  models,
  embeddingModels: list(args.embeddings),
};
await mkdir(path.dirname(jsonFile), { recursive: true });
await writeFile(
  jsonFile,
  `${JSON.stringify({ ...header, figures: Object.fromEntries([...figures].map(([m, f]) => [m, f.values])) }, null, 2)}\n`,
);
const svgFile = jsonFile.replace(/\.json$/, "") + ".svg";
// A run without decode or agents (vision, gateway) has nothing to chart.
const charted = [...throughput, ...perTurn].some((series) => series.points.length > 0);
if (charted)
  await writeFile(
    svgFile,
    svgChart([
      { title: "Decode: aggregate tokens/s", xLabel: "concurrent streams (slots = streams)", yLabel: "tokens/s", series: throughput },
      { title: `Agents (${models[0]}): TTFT p50 per turn`, xLabel: "turn", yLabel: "ms", series: perTurn },
    ]),
  );
console.log(`\nfigures: ${path.relative(process.cwd(), jsonFile)}${charted ? `, chart: ${path.relative(process.cwd(), svgFile)}` : ""}`);
