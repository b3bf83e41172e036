// Workload 2, prefill: time to first token of one request on one slot with a long fresh prompt, and
// the prompt tokens/s it implies (the server's prompt_tokens over the TTFT), against llama-bench's
// `-p <length> -n 0`, taken in turn with the servers. Then, on two slots, what a running stream sees
// while the longest prompt is read beside it: the gaps between its content chunks, the longest being
// how long the prompt starves it (prefill in chunks that share steps with running streams, or not).
import { timeHttpStream } from "./httpStream.js";
import { llamaBenchPp } from "./llamaCpp.js";
import { names, type TargetKey } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import { median, percentile } from "./stats.js";
import { inTurn, withTargets, type ModelRun, type Target } from "./targets.js";

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

/** One request with a fresh `length`-token prompt (template included), streamed for a few tokens. */
function promptRequest(run: ModelRun, prompts: PromptText, target: { url: string }, length: number, label: string) {
  return timeHttpStream(target.url, {
    model: run.preset,
    messages: [{ role: "user", content: prompts.text(length - TEMPLATE_ROOM, label) }],
    max_tokens: GENERATED,
    temperature: 0,
    ignore_eos: true,
  });
}

export async function benchPrefill(run: ModelRun, prompts: PromptText, options: PrefillOptions): Promise<void> {
  const { figures } = run;
  const longest = Math.max(...options.lengths);
  await withTargets(run, "prefill", { parallel: 1, contextSize: longest + GENERATED }, async (targets) => {
    const request = (target: { url: string }, length: number, label: string) => promptRequest(run, prompts, target, length, label);
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
  await benchStreamsDuringPrefill(run, prompts, longest, options.rounds);
}

/** How long a running stream decodes alone before the long prompt arrives, so that it is in its steady state. */
const SETTLE_MS = 1000;

/** A stream decoding on one slot while a `length`-token prompt is read on the other, gaps medians over `rounds`. */
async function benchStreamsDuringPrefill(run: ModelRun, prompts: PromptText, length: number, rounds: number): Promise<void> {
  const { figures } = run;
  await withTargets(run, "prefill_during", { parallel: 2, contextSize: length + GENERATED }, async (targets) => {
    const gaps = new Map<Target["key"], { max: number[]; p50: number[] }>(targets.map((t) => [t.key, { max: [], p50: [] }]));
    for (let round = 0; round < rounds; round++) {
      const results = await inTurn(targets, round, async (target) => {
        const times: number[] = [];
        const stop = new AbortController();
        let started!: () => void;
        const decoding = new Promise<void>((resolve) => (started = resolve));
        const running = timeHttpStream(
          target.url,
          {
            model: run.preset,
            messages: [{ role: "user", content: prompts.text(64, `Stream ${round}-${target.key}.`) }],
            // More than it can write while the long prompt is read; stopped once that prompt's first token is out.
            max_tokens: length - 128,
            temperature: 0,
            ignore_eos: true,
          },
          {
            onContent: (now) => {
              times.push(now);
              started();
            },
            signal: stop.signal,
          },
        ).catch((error: unknown) => {
          if (!stop.signal.aborted) throw error;
        });
        await decoding;
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        const sent = performance.now();
        const long = await promptRequest(run, prompts, target, length, `Document beside ${round}-${target.key}.`);
        const read = sent + long.ttftMs;
        stop.abort();
        await running;
        // Every gap that ends while the prompt is read, the first one starting before it was sent.
        const during = times.flatMap((time, i) => (i > 0 && time > sent && times[i - 1]! < read ? [time - times[i - 1]!] : []));
        if (times.at(-1)! < read) during.push(read - times.at(-1)!);
        return { max: Math.max(...during), p50: percentile(during, 50) };
      });
      for (const [key, result] of results) {
        gaps.get(key)!.max.push(result.max);
        gaps.get(key)!.p50.push(result.p50);
      }
    }
    console.log(`\n### ${run.preset}: a running stream while a ${length}-token prompt is read on the other slot, median of ${rounds}\n`);
    console.log(`| target | longest gap ms | gap p50 ms |`);
    console.log(`| --- | ---: | ---: |`);
    for (const target of targets) {
      const { max, p50 } = gaps.get(target.key)!;
      figures.set(names.prefillStall(length, target.key, "max_gap_ms"), median(max));
      figures.set(names.prefillStall(length, target.key, "p50_gap_ms"), median(p50));
      console.log(`| ${target.label} | ${median(max).toFixed(0)} | ${median(p50).toFixed(1)} |`);
    }
  });
}
