// Workload 4, serving under load, in the manner of vLLM's `bench serve`: requests arrive as a
// Poisson process at three rates around the server's saturation, with prompt lengths mixed; time to
// first token and inter-token latency (per request, vLLM's TPOT), p50 and p99, and goodput: requests
// meeting both a TTFT and an ITL target, per second.
import { timeHttpStream } from "./httpStream.js";
import { names, type TargetKey } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import {
  goodput,
  interTokenLatency,
  mean,
  percentile,
  poissonArrivals,
  seededRandom,
  type GoodputTargets,
  type StreamSample,
} from "./stats.js";
import { inTurn, withTargets, type ModelRun, type Target } from "./targets.js";

export interface LoadOptions {
  slots: number;
  /** Prompt lengths drawn with equal odds for each request. */
  promptMix: readonly number[];
  generated: number;
  requests: number;
  /** Multiples of the estimated saturation rate, lowest first. */
  rateFactors: readonly number[];
  /** Explicit targets; otherwise 4× llama-server's (or modelhost's) unloaded figures (see below). */
  targets: Partial<GoodputTargets>;
  seed: number;
}

/** Headroom of the goodput targets over a lone request's figures: loaded, a request waits for slots and shares the cores. */
const TARGET_SLACK = 4;

/**
 * Requests per second the server can sustain on `slots` slots: each request costs its prompt at the
 * prefill rate and its tokens at the aggregate decode rate of `slots` streams, both from the decode
 * and prefill workloads of this run.
 */
export function saturationRate(meanPromptTokens: number, generated: number, prefillTokS: number, aggregateTokS: number): number {
  return 1 / (meanPromptTokens / prefillTokS + generated / aggregateTokS);
}

async function fire(
  target: Target,
  model: string,
  schedule: readonly { at: number; tokens: number }[],
  prompts: PromptText,
  label: string,
  generated: number,
) {
  const started = performance.now();
  const samples = await Promise.all(
    schedule.map(async ({ at, tokens }, i) => {
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, at - (performance.now() - started))));
      return timeHttpStream(target.url, {
        model,
        messages: [{ role: "user", content: prompts.text(tokens, `Request ${label}-${i}.`) }],
        max_tokens: generated,
        temperature: 0,
        ignore_eos: true,
      });
    }),
  );
  return { samples: samples as StreamSample[], durationMs: performance.now() - started };
}

export async function benchLoad(run: ModelRun, prompts: PromptText, options: LoadOptions): Promise<void> {
  const { figures } = run;
  const longest = Math.max(...options.promptMix);
  const random = seededRandom(options.seed);
  const lengths = Array.from({ length: options.requests }, () => options.promptMix[Math.floor(random() * options.promptMix.length)]!);
  const meanPrompt = mean(lengths);
  await withTargets(run, "load", { parallel: options.slots, contextSize: longest + options.generated + 64 }, async (targets) => {
    // The reference for the targets and the fallback for saturation: each target alone, the longest prompt.
    const reference = targets.find((t) => t.key === "llama_server") ?? targets[0]!;
    const alone: StreamSample[] = [];
    for (const target of targets) {
      const sample = await fire(target, run.preset, [{ at: 0, tokens: longest }], prompts, `alone-${target.key}`, options.generated);
      if (target === reference) alone.push(...sample.samples);
    }
    const slo: GoodputTargets = {
      ttftMs: options.targets.ttftMs ?? TARGET_SLACK * alone[0]!.ttftMs,
      itlMs: options.targets.itlMs ?? TARGET_SLACK * interTokenLatency(alone[0]!),
    };
    const key: TargetKey = reference.key;
    const prefill = figures.get(names.prefillRate(Math.min(...(knownPrefillLengths(run, key) ?? [longest])), key));
    const decode = figures.get(names.decodeAggregate(options.slots, key));
    const saturation =
      prefill !== undefined && decode !== undefined
        ? saturationRate(meanPrompt, options.generated, prefill, decode)
        : // Without this run's decode and prefill figures: one request at a time, the lone request's cost.
          1000 / (alone[0]!.ttftMs + alone[0]!.decodeMs);
    const source =
      prefill !== undefined && decode !== undefined
        ? `${reference.label}'s decode ×${options.slots} and prefill figures`
        : `one lone request on ${reference.label}`;
    console.log(
      `\n### ${run.preset}: load, ${options.requests} requests a rate, prompts of ${options.promptMix.join("/")} tokens (mean ${meanPrompt.toFixed(0)}), ${options.generated} generated, ${options.slots} slots\n`,
    );
    console.log(
      `saturation ≈ ${saturation.toFixed(3)} req/s (from ${source}); goodput targets TTFT ≤ ${slo.ttftMs.toFixed(0)} ms, ITL ≤ ${slo.itlMs.toFixed(1)} ms`,
    );
    console.log(`${TARGET_SLACK}× ${reference.label}'s lone request with the longest prompt unless given\n`);
    // The means and the span beside the percentiles: a server that starts waiting prompts sooner
    // lowers TTFT and raises its running streams' ITL by the same work, in the same span; with 16
    // requests the p50 of either can move by a whole request's figure.
    console.log(
      "| rate req/s | target | TTFT p50 / p99 / mean ms | ITL p50 / p99 / mean ms | span s | goodput req/s (good/all) | modelhost ÷ llama-server |",
    );
    console.log("| ---: | --- | ---: | ---: | ---: | ---: | ---: |");
    for (const [index, factor] of options.rateFactors.entries()) {
      const rate = saturation * factor;
      const r = index + 1;
      const arrivals = poissonArrivals(rate, options.requests, options.seed + r);
      const schedule = arrivals.map((at, i) => ({ at, tokens: lengths[i]! }));
      const results = await inTurn(targets, index, (target) =>
        fire(target, run.preset, schedule, prompts, `${r}-${target.key}`, options.generated),
      );
      for (const target of targets) {
        const { samples, durationMs } = results.get(target.key)!;
        const itl = samples.map(interTokenLatency);
        const ttft = samples.map((s) => s.ttftMs);
        const good = goodput(samples, slo, durationMs);
        figures.set(names.load(r, target.key, "rate_rps"), rate);
        figures.set(names.load(r, target.key, "ttft_p50_ms"), percentile(ttft, 50));
        figures.set(names.load(r, target.key, "ttft_p99_ms"), percentile(ttft, 99));
        figures.set(names.load(r, target.key, "itl_p50_ms"), percentile(itl, 50));
        figures.set(names.load(r, target.key, "itl_p99_ms"), percentile(itl, 99));
        figures.set(names.load(r, target.key, "ttft_mean_ms"), mean(ttft));
        figures.set(names.load(r, target.key, "itl_mean_ms"), mean(itl));
        figures.set(names.load(r, target.key, "goodput_rps"), good.perSecond);
        figures.set(names.load(r, target.key, "span_s"), durationMs / 1000);
      }
      figures.ratio(names.loadGoodputRatio(r), names.load(r, "modelhost", "goodput_rps"), names.load(r, "llama_server", "goodput_rps"));
      for (const target of targets) {
        const get = (stat: Parameters<typeof names.load>[2]) => figures.get(names.load(r, target.key, stat)) ?? NaN;
        const good = goodput(results.get(target.key)!.samples, slo, results.get(target.key)!.durationMs).good;
        const ratio = target.key === "modelhost" ? (figures.get(names.loadGoodputRatio(r))?.toFixed(3) ?? "–") : "";
        console.log(
          `| ${rate.toFixed(3)} (r${r}) | ${target.label} | ${get("ttft_p50_ms").toFixed(0)} / ${get("ttft_p99_ms").toFixed(0)} / ${get("ttft_mean_ms").toFixed(0)} | ${get("itl_p50_ms").toFixed(1)} / ${get("itl_p99_ms").toFixed(1)} / ${get("itl_mean_ms").toFixed(1)} | ${get("span_s").toFixed(1)} | ${get("goodput_rps").toFixed(3)} (${good}/${options.requests}) | ${ratio} |`,
        );
      }
    }
    figures.set(names.loadSetting("target.ttft_ms"), slo.ttftMs);
    figures.set(names.loadSetting("target.itl_ms"), slo.itlMs);
    figures.set(names.loadSetting("saturation_rps"), saturation);
  });
}

/** The prompt lengths this run's prefill workload measured for `key`, if it ran. */
function knownPrefillLengths(run: ModelRun, key: TargetKey): number[] | undefined {
  const lengths = Object.keys(run.figures.values)
    .map((name) => new RegExp(`^prefill\\.p(\\d+)\\.${key}\\.prompt_tok_s$`).exec(name)?.[1])
    .filter((x): x is string => x !== undefined)
    .map(Number);
  return lengths.length > 0 ? lengths : undefined;
}
