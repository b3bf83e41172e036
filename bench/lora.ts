// npm run bench:lora [-- --rounds 3] [--threads 2] [--engine auto] [--json FILE]
//
// Issue 35: what LoRA adapters cost modelhost's batches. The bench preset (GPT-2-small-like, 110M
// parameters in Q8_0) with two rank-8 adapters of every block's seven matrices (loraAdapterWriter),
// 4 streams of 128 tokens at once, one server, the cases taking turns each round:
//   base       no adapter: one batch of 4 a step;
//   one set    all 4 with adapter a: one batch of 4 a step, the adapter's products added;
//   two sets   2 with a, 2 with b: a batch of 2 a step, the sets taking turns, and llama.cpp
//              building its compute graph anew at each turn (llama_set_adapters_lora).
// Aggregate tokens/s (all tokens over the wall time of the 4 streams), the median of the rounds;
// each case against the base. Writes a Markdown table and bench/results/lora.json.
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { loraAdapterWriter } from "../src/testmodels/loraAdapterWriter.js";
import { presets, type LlamaPreset } from "../src/testmodels/presets.js";
import { testModelPath } from "../test/support/testModels.js";
import { timeHttpStream } from "./httpStream.js";
import { startModelhost } from "./servers.js";
import { aggregateRate, median } from "./stats.js";
import { scriptOptions } from "./scriptOptions.js";
import { quiet } from "./targets.js";

const { values: args } = parseArgs({
  options: {
    ...scriptOptions,
  },
});
const rounds = Number(args.rounds);
const threads = Number(args.threads);
const jsonFile = path.resolve(args.json ?? path.join(import.meta.dirname, "results", "lora.json"));
const TOKENS = 128;
const STREAMS = 4;

const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-lora-"));
const model = await testModelPath("bench");
await symlink(model, path.join(dir, "bench.gguf"));
for (const [name, seed] of [
  ["a", 1],
  ["b", 2],
] as const) {
  await loraAdapterWriter(presets.bench as LlamaPreset, seed).write(path.join(dir, `lora-${name}.gguf`));
}
await writeFile(
  path.join(dir, "models.json"),
  JSON.stringify({
    models: [
      {
        file: "bench.gguf",
        adapters: [
          { file: "lora-a.gguf", name: "a" },
          { file: "lora-b.gguf", name: "b" },
        ],
      },
    ],
  }),
);

const cases = {
  base: ["bench", "bench", "bench", "bench"],
  one_set: ["bench+a", "bench+a", "bench+a", "bench+a"],
  two_sets: ["bench+a", "bench+b", "bench+a", "bench+b"],
} as const;
type Case = keyof typeof cases;
const rates = new Map<Case, number[]>(Object.keys(cases).map((name) => [name as Case, []]));
const server = await startModelhost({
  modelPath: model,
  modelsDir: dir,
  threads,
  parallel: STREAMS,
  contextSize: 1024,
  engine: args.engine!,
});
try {
  const ask = (name: string, i: number) =>
    timeHttpStream(server.url, {
      model: name,
      messages: [{ role: "user", content: `Stream ${i}: tell me about rivers and the sea.` }],
      max_tokens: TOKENS,
      temperature: 0,
    });
  // Warm-up: the model and both adapters loaded, each set's graph built once.
  await Promise.all(cases.two_sets.map((name, i) => ask(name, i)));
  for (let round = 0; round < rounds; round++) {
    const order = Object.keys(cases) as Case[];
    for (let i = 0; i < order.length; i++) {
      const name = order[(i + round) % order.length]!;
      await quiet();
      const started = performance.now();
      const samples = await Promise.all(cases[name].map((model, stream) => ask(model, stream)));
      if (samples.some((sample) => sample.tokens !== TOKENS)) throw new Error(`${name}: a stream wrote fewer than ${TOKENS} tokens`);
      rates.get(name)!.push(aggregateRate(samples, performance.now() - started));
    }
  }
} finally {
  await server.stop();
  await rm(dir, { recursive: true, force: true });
}

const figures: Record<string, number> = {};
const base = median(rates.get("base")!);
console.log(
  `\n## LoRA adapters — bench model (110M, Q8_0), ${STREAMS} streams of ${TOKENS} tokens, ${threads} threads, median of ${rounds}\n`,
);
console.log("| adapters | tok/s (all streams) | against no adapter |");
console.log("|---|---|---|");
for (const name of Object.keys(cases) as Case[]) {
  const rate = median(rates.get(name)!);
  figures[`lora.${name}.tok_s`] = rate;
  figures[`lora.${name}.ratio`] = rate / base;
  console.log(`| ${name.replace("_", " ")} | ${rate.toFixed(1)} | ${(rate / base).toFixed(3)} |`);
}
await mkdir(path.dirname(jsonFile), { recursive: true });
await writeFile(
  jsonFile,
  `${JSON.stringify({ date: new Date().toISOString(), threads, rounds, streams: STREAMS, tokens: TOKENS, figures, rates: Object.fromEntries(rates) }, null, 2)}\n`,
);
console.log(`\n${jsonFile}`);
