// What `n` costs: one request with n=1 and one with n=4 on a long fresh prompt (max_tokens 1, so
// the prompt is nearly all the work), through modelhost's HTTP API, with the engine's counters
// from /health: prompt evaluations, prompt tokens decoded and prompt copies per request. With the
// prompt evaluated once and copied, n=4 decodes the prompt's tokens once plus the last token 4
// times, and takes about the time of n=1, not 4 times it.
import type { EngineCounters } from "../src/core/ModelInfo.js";
import { median } from "./stats.js";

const PASSAGE =
  "The harbour town woke slowly. Fishermen checked their nets, the baker opened his shutters, and the ferry sounded its horn twice before leaving for the islands. ";

interface ChoicesSample {
  wallMs: number;
  promptTokens: number;
  counters: EngineCounters;
}

async function counters(url: string): Promise<EngineCounters> {
  return ((await (await fetch(`${url}/health`)).json()) as { counters: EngineCounters }).counters;
}

async function sample(url: string, model: string, n: number, run: number, promptRepeats: number): Promise<ChoicesSample> {
  // A different first word each time, so no sequence holds any of the prompt from before.
  const content = `Run ${run} with n ${n}. ${PASSAGE.repeat(promptRepeats)}`;
  const before = await counters(url);
  const started = performance.now();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content }], max_tokens: 1, temperature: 0, n }),
  });
  const reply = (await response.json()) as { usage?: { prompt_tokens: number }; error?: { message: string } };
  const wallMs = performance.now() - started;
  if (!response.ok || !reply.usage) throw new Error(`n=${n}: ${response.status} ${reply.error?.message ?? ""}`);
  const after = await counters(url);
  return {
    wallMs,
    promptTokens: reply.usage.prompt_tokens,
    counters: Object.fromEntries(
      Object.entries(after).map(([name, value]) => [name, value - before[name as keyof EngineCounters]]),
    ) as unknown as EngineCounters,
  };
}

/** Prints the n=1 / n=4 table for a running modelhost; `promptRepeats` sizes the prompt to fit the context. */
export async function benchChoices(url: string, model: string, options: { runs: number; promptRepeats: number }): Promise<void> {
  const samples = new Map<number, ChoicesSample[]>([
    [1, []],
    [4, []],
  ]);
  await sample(url, model, 1, -1, options.promptRepeats); // warm-up
  for (let run = 0; run < options.runs; run++) {
    for (const n of samples.keys()) samples.get(n)!.push(await sample(url, model, n, run, options.promptRepeats));
  }
  console.log(`\n### ${model}: n choices of one prompt, max_tokens 1, median of ${options.runs} runs\n`);
  console.log("| n | prompt tokens | wall ms | prompt evaluations | prompt tokens decoded | prompt copies |");
  console.log("| ---: | ---: | ---: | ---: | ---: | ---: |");
  const medians = new Map<number, { wallMs: number; decoded: number }>();
  for (const [n, list] of samples) {
    const wallMs = median(list.map((each) => each.wallMs));
    const decoded = median(list.map((each) => each.counters.promptTokensEvaluated));
    medians.set(n, { wallMs, decoded });
    const evaluations = median(list.map((each) => each.counters.promptEvaluations));
    const copies = median(list.map((each) => each.counters.promptCopies));
    console.log(
      `| ${n} | ${median(list.map((each) => each.promptTokens))} | ${wallMs.toFixed(0)} | ${evaluations} | ${decoded} | ${copies} |`,
    );
  }
  const one = medians.get(1)!;
  const four = medians.get(4)!;
  console.log(
    `\nn=4 / n=1: wall ${(four.wallMs / one.wallMs).toFixed(2)}×, prompt tokens decoded ${(four.decoded / one.decoded).toFixed(3)}× (evaluating the prompt 4 times would be 4×)`,
  );
}
