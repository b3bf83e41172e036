// npm run bench:speculation [-- --rounds 3] [--threads 2] [--engine auto] [--only ceiling,ngram] [--json FILE]
//
// Issue 35: speculative decoding, modelhost beside llama-server (built from the source
// node-llama-cpp ships) in one run, on the same files, threads and slot. The target is the
// script-1b preset: Llama-3.2-1B's blocks in Q8_0, wired to write a fixed 46-token passage at
// temperature 0 (src/testmodels/scriptWiring.ts). Each comparison starts four servers, each kind
// with and without speculation, which take turns one request at a time; a reply's decode speed is
// its tokens after the first over the time from the first to the last, and each server's speedup
// the median with speculation over the median without:
//   ceiling   a draft model writing the same script (script-tiny, other random weights): every
//             drafted token accepted, the most speculation gives on this machine;
//   useless   a draft model writing another script, for 256 tokens: nothing accepted, what
//             drafting costs when it fails (the adaptive length and the pauses keep it small);
//   ngram     no draft model: prompt lookup, the prompt asking for the passage to be rewritten
//             (it holds the passage, which the reply copies); llama-server's ngram-simple.
// --only runs some comparisons and prints their figures, no table. Writes a Markdown table,
// bench/results/speculation.json, and speculation.svg beside it.
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { makeTestModel } from "../src/testmodels/makeTestModel.js";
import { scriptTokens } from "../src/testmodels/scriptTokens.js";
import { buildLlamaCpp } from "../test/support/llamaCppBuild.js";
import { svgBars } from "./chart.js";
import { timeHttpStream } from "./httpStream.js";
import { startLlamaServer, startModelhost, type RunningProcess, type ServerOptions } from "./servers.js";
import { decodeRate, median } from "./stats.js";
import { scriptOptions } from "./scriptOptions.js";
import { quiet } from "./targets.js";

const { values: args } = parseArgs({
  options: {
    ...scriptOptions,
    /** Some of the comparisons only (the table needs the three). */
    only: { type: "string" },
  },
});
const rounds = Number(args.rounds);
const threads = Number(args.threads);
const jsonFile = path.resolve(args.json ?? path.join(import.meta.dirname, "results", "speculation.json"));

const PASSAGE = "A quiet river runs past old stone walls, under green hills, toward distant blue water.";
const OTHER = "Zebras graze quietly beside muddy ponds while bright yellow birds sing overhead.";
const passage = scriptTokens(`\n${PASSAGE}`);
/** The script's tokens after its source (the prompt's last): the whole reply. */
const REPLY_TOKENS = passage.length - 1;

const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-speculation-"));
console.log("writing the models (script-1b: about 30 s)");
const target = (await makeTestModel({ preset: "script-1b", out: path.join(dir, "target.gguf"), script: { tokens: passage } })).path;
const same = (await makeTestModel({ preset: "script-tiny", out: path.join(dir, "same.gguf"), script: { tokens: passage }, seed: 7 })).path;
const other = (
  await makeTestModel({ preset: "script-tiny", out: path.join(dir, "other.gguf"), script: { tokens: scriptTokens(`\n${OTHER}`) } })
).path;
const llamaServer = path.join(await buildLlamaCpp(["llama-server"]), "llama-server");

/**
 * One comparison: the servers with and without speculation, all four running at once and taking
 * turns request by request (bench/targets.ts's alternation), so that the machine's drift of 10-15%
 * within a run falls on both sides of each ratio.
 */
interface Comparison {
  name: "ceiling" | "useless" | "ngram";
  label: string;
  /** What the request asks: any question, or the rewrite the reply copies. */
  prompt: string;
  /** Tokens each reply writes: the script's, or (useless) more, to see what drafting costs once its pauses have grown. */
  tokens: number;
  /** modelhost's drafting: --speculation, and the draft model named in models.json. */
  modelhost: { speculation: string; draft?: string };
  llamaServer: string[];
}
const ASK = "Tell me about the river.";
const REWRITE = `Rewrite this passage: ${PASSAGE}`;
const DRAFT_MAX = "16";
const comparisons: Comparison[] = [
  {
    name: "ceiling",
    label: "a draft model of the same script (acceptance 1.0)",
    prompt: ASK,
    tokens: REPLY_TOKENS,
    modelhost: { speculation: "draft", draft: same },
    llamaServer: ["--spec-type", "draft-simple", "--spec-draft-model", same],
  },
  {
    name: "useless",
    label: "a draft model of another script (acceptance 0)",
    prompt: ASK,
    tokens: 256,
    modelhost: { speculation: "draft", draft: other },
    llamaServer: ["--spec-type", "draft-simple", "--spec-draft-model", other],
  },
  {
    name: "ngram",
    label: "n-gram, a rewrite of a passage in the prompt",
    prompt: REWRITE,
    tokens: REPLY_TOKENS,
    modelhost: { speculation: "ngram" },
    llamaServer: ["--spec-type", "ngram-simple"],
  },
];

/** What one server gave: decode tokens/s of each round, drafted and accepted tokens in all. */
interface Measured {
  rates: number[];
  drafted: number;
  accepted: number;
}
type Server = "modelhost" | "llama_server";
type Target = `${Server}_${"off" | "on"}`;
const results = new Map<Comparison["name"], Record<Target, Measured>>();

const chosen = args.only ? comparisons.filter(({ name }) => args.only!.split(",").includes(name)) : comparisons;
for (const comparison of chosen) {
  const servers: Array<[Target, RunningProcess]> = [];
  try {
    for (const on of [false, true]) {
      // modelhost's models folder: the target, and its draft named in models.json.
      const modelsDir = await mkdtemp(path.join(dir, "models-"));
      await symlink(target, path.join(modelsDir, "target.gguf"));
      if (on && comparison.modelhost.draft) {
        await symlink(comparison.modelhost.draft, path.join(modelsDir, "draft.gguf"));
        await writeFile(path.join(modelsDir, "models.json"), JSON.stringify({ models: [{ file: "target.gguf", draft: "draft" }] }));
      }
      const options: ServerOptions = { modelPath: target, modelsDir, threads, parallel: 1, contextSize: 4096 };
      const speculation = on ? comparison.modelhost.speculation : "none";
      servers.push([
        `modelhost_${on ? "on" : "off"}`,
        await startModelhost({ ...options, engine: args.engine!, extraArgs: ["--speculation", speculation, "--draft-max", DRAFT_MAX] }),
      ]);
      // The same longest draft; llama-server's default p-min (0.75) lets a draft stop early where the draft model is unsure.
      servers.push([
        `llama_server_${on ? "on" : "off"}`,
        await startLlamaServer(llamaServer, options, on ? [...comparison.llamaServer, "--spec-draft-n-max", DRAFT_MAX] : []),
      ]);
    }
    const measured = Object.fromEntries(servers.map(([key]) => [key, { rates: [], drafted: 0, accepted: 0 }])) as unknown as Record<
      Target,
      Measured
    >;
    const body = {
      model: "target",
      messages: [{ role: "user", content: comparison.prompt }],
      max_tokens: comparison.tokens,
      temperature: 0,
    };
    // A warm-up each: the model's first decode pays for its pages and the compute graph.
    for (const [, server] of servers) await timeHttpStream(server.url, { ...body, max_tokens: 4 });
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < servers.length; i++) {
        const [key, server] = servers[(i + round) % servers.length]!;
        await quiet();
        const before = await draftCounts(key, server.url);
        const sample = await timeHttpStream(server.url, body);
        if (sample.tokens !== comparison.tokens) throw new Error(`${key} wrote ${sample.tokens} tokens, not ${comparison.tokens}`);
        if (round === 0 && !sample.text.startsWith(PASSAGE.slice(0, 20)))
          throw new Error(`${key} did not write the script: ${sample.text}`);
        const after = await draftCounts(key, server.url, sample);
        measured[key].rates.push(decodeRate(sample));
        measured[key].drafted += after.drafted - before.drafted;
        measured[key].accepted += after.accepted - before.accepted;
      }
    }
    results.set(comparison.name, measured);
    const show = (m: Measured) => `${median(m.rates).toFixed(1)} tok/s (accepted ${m.accepted} of ${m.drafted} drafted)`;
    console.log(`${comparison.name}: ${servers.map(([key]) => `${key} ${show(measured[key])}`).join("; ")}`);
  } finally {
    for (const [, server] of servers) await server.stop();
  }
}

/**
 * The drafted and accepted tokens so far: modelhost's /health counters; llama-server's per reply,
 * from its last stream's timings (draft_n, draft_n_accepted), so 0 before a request.
 */
async function draftCounts(
  key: Target,
  url: string,
  sample?: { timings?: Record<string, number> },
): Promise<{ drafted: number; accepted: number }> {
  if (key.startsWith("llama_server")) return { drafted: sample?.timings?.draft_n ?? 0, accepted: sample?.timings?.draft_n_accepted ?? 0 };
  const health = (await (await fetch(`${url}/health`)).json()) as { counters: { draftTokens: number; draftTokensAccepted: number } };
  return { drafted: health.counters.draftTokens, accepted: health.counters.draftTokensAccepted };
}

if (chosen.length < comparisons.length) process.exit(0);
const rate = (name: Comparison["name"], key: Target) => median(results.get(name)![key].rates);
const speedup = (name: Comparison["name"], server: Server) => rate(name, `${server}_on`) / rate(name, `${server}_off`);
const acceptance = (name: Comparison["name"], server: Server) => {
  const m = results.get(name)![`${server}_on`];
  return m.drafted > 0 ? m.accepted / m.drafted : 0;
};
const figures: Record<string, number> = {};
console.log(`\n## Speculative decoding — script-1b (Llama-3.2-1B blocks, Q8_0), ${threads} threads, 1 stream, median of ${rounds}\n`);
console.log(
  "| draft | tokens | modelhost tok/s: without → with | speedup | accepted | llama-server tok/s: without → with | speedup | accepted |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (const { name, label, tokens } of comparisons) {
  const side = (server: Server) =>
    `${rate(name, `${server}_off`).toFixed(1)} → ${rate(name, `${server}_on`).toFixed(1)} | ${speedup(name, server).toFixed(2)}× | ${(acceptance(name, server) * 100).toFixed(0)}%`;
  console.log(`| ${label} | ${tokens} | ${side("modelhost")} | ${side("llama_server")} |`);
  for (const server of ["modelhost", "llama_server"] as const) {
    figures[`speculation.${name}.${server}_tok_s_without`] = rate(name, `${server}_off`);
    figures[`speculation.${name}.${server}_tok_s_with`] = rate(name, `${server}_on`);
    figures[`speculation.${name}.${server}_speedup`] = speedup(name, server);
    figures[`speculation.${name}.${server}_acceptance`] = acceptance(name, server);
  }
}
await mkdir(path.dirname(jsonFile), { recursive: true });
await writeFile(
  jsonFile,
  `${JSON.stringify(
    {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, memoryGiB: Math.round(os.totalmem() / 2 ** 30) },
      threads,
      rounds,
      scriptTokens: REPLY_TOKENS,
      draftMax: Number(DRAFT_MAX),
      figures,
      rates: Object.fromEntries(results),
    },
    null,
    2,
  )}\n`,
);
await writeFile(
  jsonFile.replace(/\.json$/, ".svg"),
  svgBars({
    title: `Speculative decoding: speedup (script-1b, ${threads} threads)`,
    categories: comparisons.map(({ name }) => name),
    series: [
      { name: "modelhost", values: comparisons.map(({ name }) => speedup(name, "modelhost")) },
      { name: "llama-server", values: comparisons.map(({ name }) => speedup(name, "llama_server")) },
    ],
    yLabel: "× tokens/s",
  }),
);
console.log(`\n${jsonFile}`);
await rm(dir, { recursive: true, force: true });
