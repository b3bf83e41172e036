// npm run bench [-- --models tiny,bench --embeddings embed-tiny,tiny --runs 3 --tokens 128 --threads 2 --engine auto --llama-server build|PATH
//                   --baseline DIR --json FILE]
//
// Also, per model, what n=4 choices cost against n=1 on one long prompt (bench/choices.ts).
// Decode speed and time to first token, single stream and N concurrent streams, through
// node-llama-cpp in process, through modelhost's HTTP API, and (with --llama-server) through
// llama.cpp's own server on the same file, threads and slots, with llama-bench's raw tg figure
// (taken in turn with the servers; also at the depth of the chat prompt, which every step of a
// server's stream attends to) and each server's peak memory. `--llama-server build` builds llama-server and llama-bench from
// node-llama-cpp's bundled llama.cpp source (bench/llamaCpp.ts). Each figure is a median over
// several runs; the phases of one run alternate (starting with another target each run, after a
// pause), so the machine's drift affects all alike.
// `--baseline DIR` adds another built checkout of modelhost (its own bin/modelhost.cjs, served with
// the same flags) as one more target in the same rounds, and its ratios: two processes of one build
// differ by up to ~3%, so ratios within 3% of 1 say nothing. `--json FILE` writes the summary's rows.
import { mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { loadLlama, type EngineChoice } from "../src/engine/loadLlama.js";
import { testModelPath, type CachedTestModelPreset } from "../test/support/testModels.js";
import { timeHttpStream } from "./httpStream.js";
import { benchChoices } from "./choices.js";
import { benchEmbeddings } from "./embeddings.js";
import { InProcessRunner } from "./inProcess.js";
import { llamaBenchTg, llamaCppTools } from "./llamaCpp.js";
import { baselineCheckout, startLlamaServer, startModelhost, type RunningProcess } from "./servers.js";
import { aggregateRate, decodeRate, median, type StreamSample } from "./stats.js";

const { values: args } = parseArgs({
  options: {
    models: { type: "string", default: "tiny,bench" },
    embeddings: { type: "string", default: "embed-tiny,tiny" },
    runs: { type: "string", default: "3" },
    tokens: { type: "string", default: "128" },
    threads: { type: "string" },
    concurrency: { type: "string", default: "4" },
    engine: { type: "string", default: "auto" },
    "llama-server": { type: "string" },
    baseline: { type: "string" },
    json: { type: "string" },
  },
});

const llamaCpp = args["llama-server"] ? await llamaCppTools(args["llama-server"]) : undefined;
const baseline = args.baseline ? await baselineCheckout(path.resolve(args.baseline)) : undefined;
if (baseline) console.log(`${baseline.name}: ${baseline.dir}; serve's flags since: ${baseline.flagChanges.join(", ") || "the same"}`);
const runs = Number(args.runs);
const maxTokens = Number(args.tokens);
const concurrency = Number(args.concurrency);
const contextSize = 1024;
const prompts = [
  "Tell me a long story about a lighthouse keeper who finds a message in a bottle.",
  "Explain, step by step, how a steam engine turns heat into motion.",
  "Write a detailed travel guide to a city that does not exist.",
  "Describe the rules of a board game you invent, with examples of play.",
];

/** One model's line of the closing summary, in the layout of issue 17's table. */
interface Summary {
  preset: string;
  rawTg: RawTg | undefined;
  rows: Row[];
  peakRssMiB: Map<string, number>;
}
const summaries: Summary[] = [];

interface Row {
  name: string;
  singleRate: number;
  singleTtft: number;
  multiRate: number;
  multiTtft: number;
  multiTokens: number;
}

interface Measurement {
  single: StreamSample[];
  multi: { samples: StreamSample[]; wallMs: number }[];
}

/** llama-bench's tg figure: from an empty cache (the raw figure), and with the chat prompt's tokens in the cache. */
interface RawTg {
  empty: number;
  prompt: number;
  promptTokens: number;
}

type Target = { name: string; single(): Promise<StreamSample>; multi(): Promise<{ samples: StreamSample[]; wallMs: number }> };

async function timeConcurrent(start: (i: number) => Promise<StreamSample>): Promise<{ samples: StreamSample[]; wallMs: number }> {
  const started = performance.now();
  const samples = await Promise.all(Array.from({ length: concurrency }, (_, i) => start(i)));
  return { samples, wallMs: performance.now() - started };
}

function httpTarget(name: string, server: RunningProcess, model: string): Target {
  const body = (i: number) => ({
    model,
    messages: [{ role: "user", content: prompts[i % prompts.length]! }],
    max_tokens: maxTokens,
    temperature: 0,
    ignore_eos: true,
  });
  return {
    name,
    single: () => timeHttpStream(server.url, body(0)),
    multi: () => timeConcurrent((i) => timeHttpStream(server.url, body(i))),
  };
}

async function benchModel(preset: CachedTestModelPreset): Promise<void> {
  const modelPath = await testModelPath(preset);
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-"));
  await symlink(modelPath, path.join(modelsDir, `${preset}.gguf`));
  const {
    llama,
    backend,
    threads: autoThreads,
  } = await loadLlama({ engine: args.engine as EngineChoice, gpu: "off", threads: args.threads ? Number(args.threads) : undefined });
  const threads = autoThreads;
  const serverOptions = { modelPath, modelsDir, threads, parallel: concurrency, contextSize };

  const inProcess = await InProcessRunner.load(llama, modelPath, { threads, sequences: concurrency, contextSize });
  const tokens = prompts.map((prompt) => inProcess.promptTokens(prompt));
  const targets: Target[] = [
    {
      name: "node-llama-cpp in process",
      single: async () => (await inProcess.run([tokens[0]!], maxTokens))[0]!,
      multi: async () => {
        const started = performance.now();
        const samples = await inProcess.run(
          Array.from({ length: concurrency }, (_, i) => tokens[i % tokens.length]!),
          maxTokens,
        );
        return { samples, wallMs: performance.now() - started };
      },
    },
  ];
  const processes = new Map<string, RunningProcess>();
  try {
    const modelhost = await startModelhost({ ...serverOptions, engine: args.engine });
    processes.set("modelhost HTTP", modelhost);
    targets.push(httpTarget("modelhost HTTP", modelhost, preset));
    if (llamaCpp) {
      const llamaServer = await startLlamaServer(llamaCpp.server, serverOptions);
      processes.set("llama-server HTTP", llamaServer);
      targets.push(httpTarget("llama-server HTTP", llamaServer, preset));
    }
    if (baseline) {
      const old = await startModelhost({ ...serverOptions, engine: args.engine, checkout: baseline.dir });
      processes.set(baseline.name, old);
      targets.push(httpTarget(baseline.name, old, preset));
    }

    // Warm up each target: the first decode allocates buffers and pages the weights in, and
    // modelhost's JavaScript is only optimised by V8 after some use. Warmed once, its tiny-model
    // streams went 2,920, 3,355, 4,792, 3,752, 5,399, 6,859 tokens/s over the next six requests.
    // The single stream's prompt as modelhost counts it, for llama-bench's figure at that depth.
    let promptTokens: number | undefined;
    for (const target of targets) {
      for (let i = 0; i < WARM_UP_STREAMS; i++) {
        const sample = await target.single();
        if (target.name === "modelhost HTTP" && sample.promptTokens !== undefined) promptTokens = sample.promptTokens;
      }
      await target.multi();
    }

    const results = new Map<string, Measurement>(targets.map((target) => [target.name, { single: [], multi: [] }]));
    // The raw engine: llama-bench with the same threads and tokens, once a run, in turn with the
    // servers (which sit idle meanwhile). Taken once before them, its figure for the bench model
    // was 262, 301, 308, 313 and 314 tok/s in five runs of one afternoon, and 279-289 then 305-312
    // within half an hour: the machine's speed drifts over minutes, and this way every target sees
    // the same drift.
    // Each also with the single stream's chat prompt in the cache (`-d`), which every step of a
    // server's stream attends to and `-p 0` does not: what a server could reach at best.
    const rawRuns: number[][] = [];
    for (let run = 0; run < runs; run++) {
      if (llamaCpp?.bench) {
        if (promptTokens === undefined) throw new Error("modelhost's streams carried no usage with prompt_tokens");
        await quiet();
        rawRuns.push(
          await llamaBenchTg(llamaCpp.bench, modelPath, { threads, tokens: maxTokens, repetitions: 1, depths: [0, promptTokens] }),
        );
      }
      // Each run starts with another target, and each phase after a pause: the OpenMP threads of
      // the phase before spin for a while after their last decode (libgomp's spin-wait), which
      // slowed whichever target came next: always modelhost, after node-llama-cpp in this process.
      const order = targets.map((_, i) => targets[(i + run) % targets.length]!);
      for (const target of order) {
        await quiet();
        results.get(target.name)!.single.push(await target.single());
      }
      for (const target of order) {
        await quiet();
        results.get(target.name)!.multi.push(await target.multi());
      }
    }
    // Peak memory of the comparable work, before modelhost alone runs the n-choices phase below.
    const peakRssMiB = new Map<string, number>();
    for (const [name, process] of processes) peakRssMiB.set(name, await process.peakRssMiB());
    const rawTg =
      rawRuns.length > 0 && promptTokens !== undefined
        ? { empty: median(rawRuns.map(([empty]) => empty!)), prompt: median(rawRuns.map(([, prompt]) => prompt!)), promptTokens }
        : undefined;
    const rows = report(preset, { backend, threads }, results, rawTg, peakRssMiB);
    summaries.push({ preset, rawTg, rows, peakRssMiB });
    // About 900 prompt tokens with the test vocabulary: most of the 1,024-token context.
    if (concurrency >= 4) await benchChoices(modelhost.url, preset, { runs, promptRepeats: 11 });
  } finally {
    for (const process of processes.values()) await process.stop();
    await inProcess.dispose();
    await llama.dispose();
    await rm(modelsDir, { recursive: true, force: true });
  }
}

/** Streams each target serves before it is measured. */
const WARM_UP_STREAMS = 10;

/** Long enough for the previous phase's spinning OpenMP threads to go to sleep. */
function quiet(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 200));
}

function report(
  preset: string,
  setup: { backend: string; threads: number },
  results: Map<string, Measurement>,
  rawTg: RawTg | undefined,
  peakRssMiB: Map<string, number>,
): Row[] {
  console.log(`\n## ${preset} model — ${setup.backend} llama.cpp, ${setup.threads} threads, ${maxTokens} tokens, median of ${runs} runs\n`);
  const rows: Row[] = [...results.entries()].map(([name, m]) => ({
    name,
    singleRate: median(m.single.map(decodeRate)),
    singleTtft: median(m.single.map((s) => s.ttftMs)),
    multiRate: median(m.multi.map((r) => aggregateRate(r.samples, r.wallMs))),
    multiTtft: median(m.multi.flatMap((r) => r.samples.map((s) => s.ttftMs))),
    multiTokens: median(m.multi.map((r) => r.samples.reduce((sum, s) => sum + s.tokens, 0))),
  }));
  console.log(
    `| | decode tok/s, 1 stream | TTFT ms, 1 stream | aggregate tok/s, ${concurrency} streams | TTFT ms, ${concurrency} streams | tokens, ${concurrency} streams |`,
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const row of rows) {
    console.log(
      `| ${row.name} | ${row.singleRate.toFixed(1)} | ${row.singleTtft.toFixed(1)} | ${row.multiRate.toFixed(1)} | ${row.multiTtft.toFixed(1)} | ${row.multiTokens} |`,
    );
  }
  const ours = rows.find((row) => row.name === "modelhost HTTP");
  const inProcess = rows.find((row) => row.name === "node-llama-cpp in process");
  const anchor = rows.find((row) => row.name === "llama-server HTTP");
  console.log("");
  if (rawTg !== undefined) {
    console.log(
      `llama-bench -t ${setup.threads} -p 0 -n ${maxTokens} -r 1: ${rawTg.empty.toFixed(1)} tok/s, median of ${runs} runs in turn with the servers`,
    );
    console.log(`  with the chat prompt in the cache (-d ${rawTg.promptTokens}): ${rawTg.prompt.toFixed(1)} tok/s`);
  }
  for (const [name, mib] of peakRssMiB) console.log(`peak RSS (VmHWM), ${name}: ${mib.toFixed(0)} MiB`);
  if (!ours) return rows;
  if (inProcess) {
    console.log(
      `modelhost / in process, single / ${concurrency} streams: ${ratios(ours, inProcess)}, TTFT ${(ours.singleTtft - inProcess.singleTtft).toFixed(1)} ms more`,
    );
  }
  if (anchor) {
    console.log(
      `modelhost / llama-server, single / ${concurrency} streams: ${ratios(ours, anchor)}, TTFT ${(ours.singleTtft - anchor.singleTtft).toFixed(1)} ms more`,
    );
  }
  if (rawTg !== undefined)
    console.log(`modelhost / llama-bench tg${maxTokens}, single stream, -p 0 / -d ${rawTg.promptTokens}: ${ofRaw(ours, rawTg)}`);
  const old = baseline && rows.find((row) => row.name === baseline.name);
  if (old) {
    const r = ofBaseline(ours, old);
    console.log(
      `modelhost / ${old.name}: decode ${r.singleRate.toFixed(3)}×, TTFT ${r.singleTtft.toFixed(3)}× (1 stream); aggregate ${r.multiRate.toFixed(3)}×, TTFT ${r.multiTtft.toFixed(3)}× (${concurrency} streams)`,
    );
  }
  return rows;
}

/** This checkout's figures over the baseline's: tok/s above 1 is faster, TTFT above 1 slower. */
function ofBaseline(row: Row, old: Row): Pick<Row, "singleRate" | "singleTtft" | "multiRate" | "multiTtft"> {
  return {
    singleRate: row.singleRate / old.singleRate,
    singleTtft: row.singleTtft / old.singleTtft,
    multiRate: row.multiRate / old.multiRate,
    multiTtft: row.multiTtft / old.multiTtft,
  };
}

/** One target's speeds over another's, single stream / concurrent streams, to three decimals: 0.999 misses 1.0 though it rounds to 1.00. */
function ratios(row: Row, other: Row): string {
  return `${(row.singleRate / other.singleRate).toFixed(3)}× / ${(row.multiRate / other.multiRate).toFixed(3)}×`;
}

/** A single stream's speed against llama-bench's, from an empty cache / with the prompt in it. */
function ofRaw(row: Row, raw: RawTg): string {
  return `${(row.singleRate / raw.empty).toFixed(3)}× / ${(row.singleRate / raw.prompt).toFixed(3)}×`;
}

/** All models in one table, the layout of issue 17: raw engine, in process, both servers, ratios, memory. */
function summarise(): void {
  if (summaries.length === 0) return;
  const pair = (row: Row | undefined) => (row ? `${row.singleRate.toFixed(1)} / ${row.multiRate.toFixed(1)}` : "–");
  const ratio = (ours: Row | undefined, anchor: Row | undefined) => (ours && anchor ? ratios(ours, anchor) : "–");
  const mib = (value: number | undefined) => (value === undefined ? "–" : `${value.toFixed(0)}`);
  console.log(`\n## Summary — tok/s, 1 stream / ${concurrency} streams, ${maxTokens} tokens, median of ${runs} runs\n`);
  console.log(
    `| model | raw engine tg${maxTokens} / at the prompt's depth | in process 1 / ×${concurrency} | modelhost HTTP 1 / ×${concurrency} | llama-server 1 / ×${concurrency} | modelhost ÷ llama-server | modelhost 1 ÷ raw / at depth | peak RSS MiB modelhost / llama-server |`,
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const { preset, rawTg, rows, peakRssMiB } of summaries) {
    const by = (name: string) => rows.find((row) => row.name === name);
    const ours = by("modelhost HTTP");
    const anchor = by("llama-server HTTP");
    const raw = rawTg === undefined ? "–" : `${rawTg.empty.toFixed(1)} / ${rawTg.prompt.toFixed(1)}`;
    const singleOfRaw = rawTg === undefined || !ours ? "–" : ofRaw(ours, rawTg);
    console.log(
      `| ${preset} | ${raw} | ${pair(by("node-llama-cpp in process"))} | ${pair(ours)} | ${pair(anchor)} | ${ratio(ours, anchor)} | ${singleOfRaw} | ${mib(peakRssMiB.get("modelhost HTTP"))} / ${mib(peakRssMiB.get("llama-server HTTP"))} |`,
    );
  }
  if (!baseline) return;
  console.log(`\n## modelhost ÷ ${baseline.name} — tok/s above 1× is faster, TTFT above 1× slower\n`);
  console.log(
    `| model | ${baseline.name} 1 / ×${concurrency} | tok/s, 1 stream | TTFT, 1 stream | tok/s, ${concurrency} streams | TTFT, ${concurrency} streams |`,
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
  for (const { preset, rows } of summaries) {
    const ours = rows.find((row) => row.name === "modelhost HTTP");
    const old = rows.find((row) => row.name === baseline.name);
    const r = ours && old ? ofBaseline(ours, old) : undefined;
    const cells = r ? [r.singleRate, r.singleTtft, r.multiRate, r.multiTtft].map((x) => `${x.toFixed(3)}×`) : ["–", "–", "–", "–"];
    console.log(`| ${preset} | ${pair(old)} | ${cells.join(" | ")} |`);
  }
}

/** The summary's rows as JSON: each target's medians and peak RSS, and the ratios to the baseline. */
async function writeJson(file: string): Promise<void> {
  const models = summaries.map(({ preset, rawTg, rows, peakRssMiB }) => {
    const ours = rows.find((row) => row.name === "modelhost HTTP");
    const old = baseline && rows.find((row) => row.name === baseline.name);
    return {
      model: preset,
      rawTg,
      rows: rows.map((row) => ({ ...row, peakRssMiB: peakRssMiB.get(row.name) })),
      ...(ours && old ? { ofBaseline: ofBaseline(ours, old) } : {}),
    };
  });
  const setup = { tokens: maxTokens, runs, concurrency, baseline: baseline?.name, baselineFlagChanges: baseline?.flagChanges };
  await writeFile(file, `${JSON.stringify({ ...setup, models }, null, 2)}\n`);
}

for (const preset of args.models.split(",").filter(Boolean)) await benchModel(preset.trim() as CachedTestModelPreset);
summarise();
if (args.json) await writeJson(args.json);
{
  const { llama, threads } = await loadLlama({
    engine: args.engine as EngineChoice,
    gpu: "off",
    threads: args.threads ? Number(args.threads) : undefined,
  });
  for (const preset of args.embeddings.split(",").filter(Boolean)) {
    await benchEmbeddings(llama, preset.trim() as CachedTestModelPreset, { runs, threads, engine: args.engine });
  }
  await llama.dispose();
}
