// Workload 2, prefill: time to first token of one request on one slot with a long fresh prompt, and
// the prompt tokens/s it implies (the server's prompt_tokens over the TTFT), against llama-bench's
// `-p <length> -n 0`, taken in turn with the servers.
import { timeHttpStream } from "./httpStream.js";
import { llamaBenchPp } from "./llamaCpp.js";
import { names, type TargetKey } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import { median } from "./stats.js";
import { inTurn, withTargets, type ModelRun } from "./targets.js";

export interface PrefillOptions {
  /** Prompt lengths in tokens: 512, 2,048 and 4,096 in the full run. */
  lengths: readonly number[];
  rounds: number;
}

/**
 * Tokens the chat template adds around the user's text, kept free so that the rendered prompt of a
 * "4,096-token prompt" stays within 4,096 tokens: a test model's context is 4,096 (modelhost clamps
 * its context to the model's), and the templates of the models benched add under 40.
 */
const TEMPLATE_ROOM = 48;
/** Tokens generated: a few, so the first one with text arrives even when one is only part of a character. */
const GENERATED = 4;

export async function benchPrefill(run: ModelRun, prompts: PromptText, options: PrefillOptions): Promise<void> {
  const { figures } = run;
  const longest = Math.max(...options.lengths);
  await withTargets(run, "prefill", { parallel: 1, contextSize: longest + GENERATED }, async (targets) => {
    const request = (target: { url: string }, length: number, label: string) =>
      timeHttpStream(target.url, {
        model: run.preset,
        messages: [{ role: "user", content: prompts.text(length - TEMPLATE_ROOM, label) }],
        max_tokens: GENERATED,
        temperature: 0,
        ignore_eos: true,
      });
    for (const target of targets) await request(target, options.lengths[0]!, "Warm-up.");
    const samples = new Map<TargetKey, Map<number, { ttftMs: number; promptTokens: number }[]>>(
      targets.map((t) => [t.key, new Map(options.lengths.map((length) => [length, []]))]),
    );
    const raw = new Map<number, number[]>(options.lengths.map((length) => [length, []]));
    for (let round = 0; round < options.rounds; round++) {
      if (run.llamaBench) {
        const rates = await llamaBenchPp(run.llamaBench, run.modelPath, { threads: run.threads, lengths: options.lengths, repetitions: 1 });
        options.lengths.forEach((length, i) => raw.get(length)!.push(rates[i]!));
      }
      for (const length of options.lengths) {
        const results = await inTurn(targets, round, (target) => request(target, length, `Document ${round}-${target.key}-${length}.`));
        for (const [key, sample] of results) {
          if (sample.promptTokens === undefined) throw new Error(`${key}'s stream carried no usage`);
          samples.get(key)!.get(length)!.push({ ttftMs: sample.ttftMs, promptTokens: sample.promptTokens });
        }
      }
    }
    console.log(`\n### ${run.preset}: prefill, one request on one slot, median of ${options.rounds}\n`);
    console.log(
      `| prompt | ${targets.map((t) => `${t.label} TTFT ms / prompt tok/s`).join(" | ")} | llama-bench -p tok/s | modelhost ÷ llama-server |`,
    );
    console.log(`| --- | ${targets.map(() => "---:").join(" | ")} | ---: | ---: |`);
    for (const length of options.lengths) {
      const cells: string[] = [];
      for (const target of targets) {
        const list = samples.get(target.key)!.get(length)!;
        const ttft = median(list.map((s) => s.ttftMs));
        const rate = median(list.map((s) => (s.promptTokens * 1000) / s.ttftMs));
        figures.set(names.prefillTtft(length, target.key), ttft);
        figures.set(names.prefillRate(length, target.key), rate);
        cells.push(`${ttft.toFixed(0)} / ${rate.toFixed(0)}`);
      }
      figures.set(names.prefillRaw(length), median(raw.get(length)!));
      figures.ratio(names.prefillRatio(length), names.prefillRate(length, "modelhost"), names.prefillRate(length, "llama_server"));
      const rawRate = figures.get(names.prefillRaw(length));
      const ratio = figures.get(names.prefillRatio(length));
      console.log(`| ${length} | ${cells.join(" | ")} | ${rawRate?.toFixed(0) ?? "–"} | ${ratio?.toFixed(3) ?? "–"}× |`);
    }
  });
}
