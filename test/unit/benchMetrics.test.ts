import { describe, expect, it } from "vitest";
import { svgChart, ticks } from "../../bench/chart.js";
import { goalOf, ModelFigures, names, summaryTable } from "../../bench/metrics.js";

describe("bench figure names", () => {
  it("spells the goals' ratios as issue 32 names them", () => {
    expect(names.decodeRatio(16)).toBe("decode.c16.ratio");
    expect(names.prefillRatio(4096)).toBe("prefill.p4096.ratio");
    expect(names.agentRatio("ttft_p50")).toBe("agent.ttft_p50.ratio");
    expect(names.loadGoodputRatio(2)).toBe("load.goodput.r2.ratio");
    expect(names.embeddingsRatio()).toBe("embeddings.ratio");
    expect(names.memoryDelta("agent")).toBe("memory.agent.rss_delta_mib");
    expect(names.decodeAggregate(4, "llama_server")).toBe("decode.c4.llama_server.aggregate_tok_s");
    expect(names.agentTurn(3, "ttft_p90", "modelhost")).toBe("agent.turn3.modelhost.ttft_p90_ms");
    expect(names.load(1, "modelhost", "goodput_rps")).toBe("load.r1.modelhost.goodput_rps");
    expect(names.decodeRatio(16, "q8_0")).toBe("decode.c16_kv_q8_0.ratio");
    expect(names.decodeAggregate(16, "modelhost", "q8_0")).toBe("decode.c16_kv_q8_0.modelhost.aggregate_tok_s");
    expect(names.memorySaving("decode_c16_kv_q8_0", "llama_server")).toBe("memory.decode_c16_kv_q8_0.llama_server.saving_mib");
  });

  it("knows each goal and whether a value meets it", () => {
    expect(goalOf("decode.c16.ratio")!.met(1.0)).toBe(true);
    expect(goalOf("prefill.p512.ratio")!.met(0.99)).toBe(false);
    expect(goalOf("load.goodput.r3.ratio")!.text).toBe("≥ 1.0");
    expect(goalOf("embeddings.ratio")!.met(1.2)).toBe(true);
    expect(goalOf("agent.ttft_p50.ratio")!.met(0.81)).toBe(false);
    expect(goalOf("agent.ttft_p50.ratio")!.met(0.8)).toBe(true);
    expect(goalOf("memory.decode_c16.rss_delta_mib")!.met(151)).toBe(false);
    expect(goalOf("agent.wall.ratio")).toBeUndefined();
    expect(goalOf("decode.c4.modelhost.aggregate_tok_s")).toBeUndefined();
    expect(goalOf("decode.c16_kv_q8_0.ratio")!.met(0.99)).toBe(false);
    expect(goalOf("memory.decode_c16_kv_q8_0.rss_delta_mib")!.met(150)).toBe(true);
    expect(goalOf("memory.decode_c16_kv_q8_0.modelhost.saving_mib")).toBeUndefined();
  });

  it("names the gateway's figures (issue 34) and knows their goals", () => {
    expect(names.gatewayCache("affinity", "cached_share")).toBe("gateway.affinity.cached_share");
    expect(names.gatewayCacheTurn("round_robin", 3)).toBe("gateway.round_robin.turn3.cached_share");
    expect(names.gatewayOverhead("burst", 64, "gateway", "first_chunk_p99_ms")).toBe(
      "gateway.overhead.burst.c64.gateway.first_chunk_p99_ms",
    );
    expect(goalOf(names.gatewayCache("affinity", "cached_share"))!.met(0.8)).toBe(true);
    expect(goalOf(names.gatewayCache("round_robin", "cached_share"))).toBeUndefined();
    expect(goalOf(names.gatewayAdded("paced_20ms", 64, "first_chunk_p50_added_ms"))!.met(2.1)).toBe(false);
    expect(goalOf(names.gatewayAdded("burst", 64, "first_chunk_p99_added_ms"))).toBeUndefined();
    expect(goalOf(names.gatewayThroughputRatio("burst", 64))!.met(0.95)).toBe(true);
    const figures = new ModelFigures();
    figures.set(names.gatewayCache("affinity", "cached_share"), 0.85);
    figures.set(names.gatewayAdded("burst", 64, "first_chunk_p50_added_ms"), 1.5);
    expect(
      summaryTable(new Map([["m", figures]]))
        .split("\n")
        .slice(2),
    ).toEqual([
      "| m | `gateway.affinity.cached_share` | 0.850 | ≥ 0.8 | yes |",
      "| m | `gateway.overhead.burst.c64.first_chunk_p50_added_ms` | 1.50 ms | ≤ 2 ms | yes |",
    ]);
  });

  it("keeps finite figures, computes ratios, and tabulates ratios and memory only", () => {
    const figures = new ModelFigures();
    figures.set(names.decodeAggregate(4, "modelhost"), 300);
    figures.set(names.decodeAggregate(4, "llama_server"), 250);
    figures.set(names.decodePerStream(4, "modelhost"), NaN);
    figures.ratio(names.decodeRatio(4), names.decodeAggregate(4, "modelhost"), names.decodeAggregate(4, "llama_server"));
    figures.ratio(names.decodeRatio(8), names.decodeAggregate(8, "modelhost"), names.decodeAggregate(8, "llama_server"));
    figures.set(names.memoryDelta("decode_c4"), 200);
    expect(figures.values).toEqual({
      "decode.c4.modelhost.aggregate_tok_s": 300,
      "decode.c4.llama_server.aggregate_tok_s": 250,
      "decode.c4.ratio": 1.2,
      "memory.decode_c4.rss_delta_mib": 200,
    });
    expect(
      summaryTable(new Map([["bench", figures]]))
        .split("\n")
        .slice(2),
    ).toEqual([
      "| bench | `decode.c4.ratio` | 1.200× | ≥ 1.0 | yes |",
      "| bench | `memory.decode_c4.rss_delta_mib` | 200 | ≤ 150 | **no** |",
    ]);
  });

  it("draws one panel per set of series that has points", () => {
    expect(ticks(230)).toEqual([0, 50, 100, 150, 200, 250]);
    const svg = svgChart([
      {
        title: "tok/s",
        xLabel: "streams",
        yLabel: "tok/s",
        series: [
          { name: "no points", points: [] },
          {
            name: "a <b>",
            points: [
              [1, 10],
              [4, 30],
            ],
          },
        ],
      },
      { title: "empty", xLabel: "", yLabel: "", series: [{ name: "none", points: [] }] },
    ]);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="460"')).toBe(true);
    expect(svg).toContain("a &lt;b&gt;");
    expect(svg).not.toContain("empty");
    expect(svg).not.toContain("no points");
    expect(svg.match(/<circle /g)).toHaveLength(2);
  });
});
