// The figures' stable names in bench/results/latest.json, one builder per name so that the writer,
// the Markdown table, the chart and a script checking the goals all spell them alike.

/** The targets a workload measures, as they appear in the names. */
export type TargetKey = "modelhost" | "llama_server" | "baseline";

export type AgentStat = "ttft_p50" | "ttft_p90" | "wall";
export type GatewayRouting = "affinity" | "round_robin";
export type GatewayStat =
  | "first_chunk_p50_ms"
  | "first_chunk_p99_ms"
  | "requests_s"
  | "chunks_s"
  | "gateway_cpu_us_per_request"
  | "upstream_cpu_us_per_request"
  | "client_cpu_us_per_request";
export type LoadStat =
  "rate_rps" | "ttft_p50_ms" | "ttft_p99_ms" | "ttft_mean_ms" | "itl_p50_ms" | "itl_p99_ms" | "itl_mean_ms" | "goodput_rps" | "span_s";

/**
 * A decode run's name: `c<streams>`, and `_kv_<type>` when both servers ran with keys and values
 * in `type` (--cache-type-k, --cache-type-v) rather than the default f16.
 */
export function decodeRun(streams: number, cacheType?: string): string {
  return `c${streams}${cacheType === undefined ? "" : `_kv_${cacheType}`}`;
}

export const names = {
  /** modelhost's aggregate tokens/s over llama-server's, `streams` concurrent streams: the goal is ≥ 1. */
  decodeRatio: (streams: number, cacheType?: string) => `decode.${decodeRun(streams, cacheType)}.ratio`,
  decodeAggregate: (streams: number, target: TargetKey, cacheType?: string) =>
    `decode.${decodeRun(streams, cacheType)}.${target}.aggregate_tok_s`,
  decodePerStream: (streams: number, target: TargetKey, cacheType?: string) =>
    `decode.${decodeRun(streams, cacheType)}.${target}.per_stream_tok_s`,
  /** llama-bench's tg figure (`-p 0`), the raw engine's single stream. */
  decodeRaw: () => "decode.c1.llama_bench.tok_s",
  /** The same with the chat prompt in llama-bench's cache (`-d`): every step of a server's stream attends to it. */
  decodeRawAtPrompt: () => "decode.c1.llama_bench.at_prompt_tok_s",
  /** modelhost's prompt tokens/s over llama-server's (the inverse of their TTFT ratio): ≥ 1. */
  prefillRatio: (promptTokens: number) => `prefill.p${promptTokens}.ratio`,
  prefillTtft: (promptTokens: number, target: TargetKey) => `prefill.p${promptTokens}.${target}.ttft_ms`,
  prefillRate: (promptTokens: number, target: TargetKey) => `prefill.p${promptTokens}.${target}.prompt_tok_s`,
  prefillRaw: (promptTokens: number) => `prefill.p${promptTokens}.llama_bench.prompt_tok_s`,
  /** A running stream's gaps between content chunks while another request's prompt is read (lower is better). */
  prefillStall: (promptTokens: number, target: TargetKey, stat: "max_gap_ms" | "p50_gap_ms") =>
    `prefill.during_p${promptTokens}.${target}.${stat}`,
  /** modelhost's figure over llama-server's, over turns 2 onwards (TTFT) or the whole run (wall): ≤ 0.8 for ttft_p50. */
  agentRatio: (stat: AgentStat) => `agent.${stat}.ratio`,
  agentOverall: (stat: AgentStat, target: TargetKey) => `agent.${target}.${stat}_ms`,
  agentTurn: (turn: number, stat: "ttft_p50" | "ttft_p90", target: TargetKey) => `agent.turn${turn}.${target}.${stat}_ms`,
  /** modelhost's goodput over llama-server's at the rate-th of the three rates (1 = the lowest): ≥ 1. */
  loadGoodputRatio: (rate: number) => `load.goodput.r${rate}.ratio`,
  load: (rate: number, target: TargetKey, stat: LoadStat) => `load.r${rate}.${target}.${stat}`,
  /** The goodput targets used, and the saturation rate the three rates were taken around. */
  loadSetting: (setting: "target.ttft_ms" | "target.itl_ms" | "saturation_rps") => `load.${setting}`,
  /** modelhost's passages/s over llama-server's: ≥ 1. */
  embeddingsRatio: () => "embeddings.ratio",
  embeddings: (target: TargetKey) => `embeddings.${target}.passages_s`,
  /** modelhost's time to first token for one image over llama-server's (lower is better), and its images/s over theirs. */
  visionTtftRatio: () => "vision.ttft_p50.ratio",
  visionTtft: (target: TargetKey) => `vision.${target}.ttft_p50_ms`,
  visionRateRatio: () => "vision.images_s.ratio",
  visionRate: (target: TargetKey) => `vision.${target}.images_s`,
  /**
   * Issue 34's gateway, affinity: of the prompt tokens of turns 2 onwards, the share the workers
   * found in their caches (cached_tokens / prompt_tokens through the gateway), by the pool's routing:
   * ≥ 0.8 with affinity. `cacheable_share`: the share the previous turn's prompt makes of each
   * prompt, what a worker holding it could find at most (its reply, read back, tokenizes otherwise).
   */
  gatewayCache: (routing: GatewayRouting, stat: "cached_share" | "cacheable_share" | "wall_s" | "affinity_hits" | "affinity_misses") =>
    `gateway.${routing}.${stat}`,
  gatewayCacheTurn: (routing: GatewayRouting, turn: number) => `gateway.${routing}.turn${turn}.cached_share`,
  /**
   * Issue 34's gateway, overhead at `streams` concurrent streams: through the gateway or straight to
   * the (fake) upstream, which streams its chunks back to back (`burst`) or `paced_<n>ms` apart.
   * Added ms at p50 ≤ 2; the gateway's requests/s over direct's ≥ 0.95.
   */
  gatewayOverhead: (upstream: string, streams: number, path: "direct" | "gateway", stat: GatewayStat) =>
    `gateway.overhead.${upstream}.c${streams}.${path}.${stat}`,
  gatewayAdded: (upstream: string, streams: number, stat: "first_chunk_p50_added_ms" | "first_chunk_p99_added_ms") =>
    `gateway.overhead.${upstream}.c${streams}.${stat}`,
  gatewayThroughputRatio: (upstream: string, streams: number) => `gateway.overhead.${upstream}.c${streams}.throughput.ratio`,
  /** modelhost's peak RSS minus llama-server's, in MiB: ≤ 150. */
  memoryDelta: (workload: string) => `memory.${workload}.rss_delta_mib`,
  memory: (workload: string, target: TargetKey) => `memory.${workload}.${target}.peak_rss_mib`,
  /** The workload's KV cache (slots × context, in its type), in MiB: its share of each peak. */
  memoryKvCache: (workload: string) => `memory.${workload}.kv_cache_mib`,
  /** A server's peak RSS with an f16 KV cache minus its peak with a quantized one (`workload`), in MiB. */
  memorySaving: (workload: string, target: TargetKey) => `memory.${workload}.${target}.saving_mib`,
};

/** Issue 32's goal for a name, when it has one. */
export interface Goal {
  text: string;
  met(value: number): boolean;
}

export function goalOf(name: string): Goal | undefined {
  if (/^(decode\.c\d+(_kv_\w+)?|prefill\.p\d+|load\.goodput\.r\d+)\.ratio$|^(embeddings|vision\.images_s)\.ratio$/.test(name))
    return { text: "≥ 1.0", met: (value) => value >= 1 };
  if (name === names.agentRatio("ttft_p50")) return { text: "≤ 0.8", met: (value) => value <= 0.8 };
  if (name === names.visionTtftRatio()) return { text: "≤ 1.0", met: (value) => value <= 1 };
  if (/^memory\.[\w-]+\.rss_delta_mib$/.test(name)) return { text: "≤ 150", met: (value) => value <= 150 };
  if (name === names.gatewayCache("affinity", "cached_share")) return { text: "≥ 0.8", met: (value) => value >= 0.8 };
  if (/^gateway\.overhead\.\w+\.c\d+\.first_chunk_p50_added_ms$/.test(name)) return { text: "≤ 2 ms", met: (value) => value <= 2 };
  if (/^gateway\.overhead\.\w+\.c\d+\.throughput\.ratio$/.test(name)) return { text: "≥ 0.95", met: (value) => value >= 0.95 };
  return undefined;
}

/** One model's figures, by name; NaN and missing figures are left out. */
export class ModelFigures {
  readonly values: Record<string, number> = {};

  set(name: string, value: number): void {
    if (Number.isFinite(value)) this.values[name] = value;
  }

  get(name: string): number | undefined {
    return this.values[name];
  }

  /** `ours / theirs` under `name`, when both are there. */
  ratio(name: string, ours: string, theirs: string): void {
    const a = this.get(ours);
    const b = this.get(theirs);
    if (a !== undefined && b !== undefined) this.set(name, a / b);
  }
}

/** The Markdown table of every ratio, memory delta and other figure with a goal of each model, with its goal. */
export function summaryTable(models: ReadonlyMap<string, ModelFigures>): string {
  const lines = ["| model | figure | value | goal | met |", "| --- | --- | ---: | --- | --- |"];
  for (const [model, figures] of models) {
    for (const [name, value] of Object.entries(figures.values)) {
      const goal = goalOf(name);
      if (!name.endsWith(".ratio") && !name.endsWith(".rss_delta_mib") && !goal) continue;
      const shown = name.endsWith(".ratio")
        ? `${value.toFixed(3)}×`
        : name.endsWith("_mib")
          ? value.toFixed(0)
          : name.endsWith("_ms")
            ? `${value.toFixed(2)} ms`
            : value.toFixed(3);
      lines.push(`| ${model} | \`${name}\` | ${shown} | ${goal?.text ?? ""} | ${goal ? (goal.met(value) ? "yes" : "**no**") : ""} |`);
    }
  }
  return lines.join("\n");
}
