// Workload 7, the gateway (issue 34): modelhost with --upstreams in front of other servers.
//
// Affinity: `conversations` conversations of `turns` turns on `workers` modelhost workers (each in
// its own process, one thread, a slot per conversation so that a worker can hold every conversation
// routed to it), through a gateway process whose upstreams file routes by `affinity` or by
// `round-robin`, the workers started afresh for each. A conversation's turns go one after another,
// the conversations at once, all with the same system prompt (one application's), each turn ending
// with `generated` tokens. The figure: of the prompt tokens of turns 2 onwards, the share the
// workers found in their caches, as the gateway passes their usage on
// (`prompt_tokens_details.cached_tokens` / `prompt_tokens`).
//
// Overhead: a fake upstream (bench/fakeUpstream.ts, its own process) streams the same `chunks`
// content chunks, back to back (`burst`) or 20 ms apart (`paced_20ms`, a model decoding 50
// tokens/s); `streams` clients at once (keep-alive connections, each sending its next request when
// its last one ended) call it directly, then through a gateway process, taking turns over `rounds`
// rounds after a warm-up. Time to the first content chunk (p50, p99) and requests/s; and each
// process's CPU time a request (/proc/<pid>/stat), which decides the burst case's throughput: there
// the load generator, the fake upstream and the gateway share two cores, and a closed loop of 64
// clients keeps them all busy, so the gateway's latency is its queue (Little's law: 64 / its
// requests/s). Paced, the upstream's pace decides both, as a model's would. One stream at a time
// (`c1`) gives the gateway's own latency, without a queue.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { timeHttpStream } from "./httpStream.js";
import { names, type GatewayRouting, type GatewayStat } from "./metrics.js";
import type { PromptText } from "./promptText.js";
import { startModelhost, startScript, type RunningProcess } from "./servers.js";
import { percentile } from "./stats.js";
import { quiet, type ModelRun } from "./targets.js";

export interface GatewayOptions {
  affinity: {
    workers: number;
    conversations: number;
    turns: number;
    systemTokens: number;
    turnTokens: number;
    generated: number;
    /** Per-slot context: the last turn's whole conversation must fit. */
    contextSize: number;
  };
  overhead: {
    streams: number;
    /**
     * The fake upstreams, each measured on its own: `intervalMs` between chunks (0: back to back,
     * what the gateway's CPU a request decides; 20: a model decoding 50 tokens/s), and the
     * requests per path per round, over all streams.
     */
    upstreams: ReadonlyArray<{ intervalMs: number; requests: number; streams?: number }>;
    rounds: number;
    /** Content chunks of each fake reply. */
    chunks: number;
  };
}

export async function benchGateway(run: ModelRun, prompts: PromptText, options: GatewayOptions): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-gateway-"));
  try {
    await benchAffinity(run, prompts, options.affinity, dir);
    await benchOverhead(run, options.overhead, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A gateway process serving `models` (the upstreams file's), with no model of its own. */
async function startGateway(run: ModelRun, dir: string, models: Record<string, unknown>): Promise<RunningProcess> {
  const file = path.join(dir, `upstreams-${Date.now()}.json`);
  await writeFile(file, JSON.stringify({ models }));
  const empty = await mkdtemp(path.join(dir, "models-"));
  return startModelhost({
    modelPath: "",
    modelsDir: empty,
    threads: 1,
    parallel: 1,
    contextSize: 512,
    engine: run.setup.engine,
    extraArgs: ["--upstreams", file],
  });
}

interface Turn {
  promptTokens: number;
  cachedTokens: number;
}

async function benchAffinity(run: ModelRun, prompts: PromptText, options: GatewayOptions["affinity"], dir: string): Promise<void> {
  const system =
    "You are the support assistant of a ferry company. Answer the passenger's question from the notes below, briefly and politely.\nNotes:\n";
  const systemPrompt = system + prompts.text(Math.max(1, options.systemTokens - prompts.count(system)), "Timetables.");
  const results = new Map<GatewayRouting, { turns: Turn[][]; wallMs: number; hits: number; misses: number }>();
  for (const routing of ["affinity", "round_robin"] as const) {
    const workers = await Promise.all(
      Array.from({ length: options.workers }, () =>
        startModelhost({
          modelPath: run.modelPath,
          modelsDir: run.modelsDir,
          threads: 1,
          parallel: options.conversations,
          contextSize: options.contextSize,
          engine: run.setup.engine,
        }),
      ),
    );
    let gateway: RunningProcess | undefined;
    try {
      gateway = await startGateway(run, dir, {
        chat: {
          model: run.preset,
          routing: routing === "affinity" ? "affinity" : "round-robin",
          endpoints: workers.map((worker) => ({ url: `${worker.url}/v1`, maxConcurrent: options.conversations })),
        },
      });
      // Each worker's model loaded and its first decode done, without the system prompt.
      for (const worker of workers)
        await timeHttpStream(worker.url, {
          model: run.preset,
          messages: [{ role: "user", content: "Hello." }],
          max_tokens: 4,
          temperature: 0,
        });
      await quiet();
      const started = performance.now();
      const turns = await Promise.all(
        Array.from({ length: options.conversations }, (_, c) => converse(gateway!.url, systemPrompt, prompts, options, `${routing}-${c}`)),
      );
      const wallMs = performance.now() - started;
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
      const count = (result: string) =>
        Number(new RegExp(`^modelhost_upstream_affinity_total\\{[^}]*result="${result}"[^}]*\\} (\\d+)`, "m").exec(metrics)?.[1] ?? 0);
      results.set(routing, { turns, wallMs, hits: count("hit"), misses: count("miss") });
    } finally {
      await gateway?.stop();
      for (const worker of workers) await worker.stop();
    }
  }

  const share = (turns: Turn[][], from: number, to: number) => {
    const later = turns.flatMap((conversation) => conversation.slice(from - 1, to));
    return later.reduce((sum, t) => sum + t.cachedTokens, 0) / later.reduce((sum, t) => sum + t.promptTokens, 0);
  };
  console.log(
    `\n### ${run.preset}: gateway affinity, ${options.conversations} conversations × ${options.turns} turns on ${options.workers} workers (${options.conversations} slots, 1 thread each), ~${options.systemTokens}-token system prompt shared, ~${options.turnTokens} tokens a turn, ${options.generated} generated\n`,
  );
  console.log(
    `| routing | cached share, turns 2–${options.turns} | ${range(2, options.turns)
      .map((t) => `turn ${t}`)
      .join(" | ")} | affinity hits / misses | wall |`,
  );
  console.log(
    `| --- | ---: | ${range(2, options.turns)
      .map(() => "---:")
      .join(" | ")} | ---: | ---: |`,
  );
  for (const [routing, result] of results) {
    const overall = share(result.turns, 2, options.turns);
    run.figures.set(names.gatewayCache(routing, "cached_share"), overall);
    run.figures.set(names.gatewayCache(routing, "wall_s"), result.wallMs / 1000);
    run.figures.set(names.gatewayCache(routing, "affinity_hits"), result.hits);
    run.figures.set(names.gatewayCache(routing, "affinity_misses"), result.misses);
    // What a worker holding the conversation's previous prompt could serve from it at most.
    const previous = result.turns.flatMap((conversation) => conversation.slice(0, -1).map((t) => t.promptTokens));
    const later = result.turns.flatMap((conversation) => conversation.slice(1).map((t) => t.promptTokens));
    run.figures.set(names.gatewayCache(routing, "cacheable_share"), previous.reduce((a, b) => a + b, 0) / later.reduce((a, b) => a + b, 0));
    const perTurn = range(2, options.turns).map((turn) => {
      const value = share(result.turns, turn, turn);
      run.figures.set(names.gatewayCacheTurn(routing, turn), value);
      return `${(value * 100).toFixed(1)}%`;
    });
    const hits = routing === "affinity" ? `${result.hits} / ${result.misses}` : "—";
    console.log(
      `| ${routing} | ${(overall * 100).toFixed(1)}% | ${perTurn.join(" | ")} | ${hits} | ${(result.wallMs / 1000).toFixed(1)} s |`,
    );
  }
  const cacheable = run.figures.get(names.gatewayCache("affinity", "cacheable_share"))!;
  console.log(
    `\nthe previous turn's prompt makes ${(cacheable * 100).toFixed(1)}% of turns 2–${options.turns}' prompts (what a worker can hold of them)`,
  );
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

async function converse(
  url: string,
  system: string,
  prompts: PromptText,
  options: GatewayOptions["affinity"],
  id: string,
): Promise<Turn[]> {
  const messages = [{ role: "system", content: system }];
  const turns: Turn[] = [];
  for (let turn = 1; turn <= options.turns; turn++) {
    messages.push({ role: "user", content: prompts.text(options.turnTokens, `Passenger ${id}, question ${turn}:`) });
    const reply = await timeHttpStream(url, { model: "chat", messages, max_tokens: options.generated, temperature: 0, ignore_eos: true });
    if (reply.promptTokens === undefined || reply.cachedTokens === undefined)
      throw new Error("the gateway's usage has no prompt_tokens or prompt_tokens_details.cached_tokens");
    turns.push({ promptTokens: reply.promptTokens, cachedTokens: reply.cachedTokens });
    messages.push({ role: "assistant", content: reply.text });
  }
  return turns;
}

interface Round {
  firstChunkMs: number[];
  wallMs: number;
  chunks: number;
  clientCpuS: number;
  cpuS: Map<string, number>;
}

/**
 * One streamed request on a keep-alive connection, read as lightly as it can be (the load generator
 * shares the cores with what it measures): the time to the first chunk with content, and the number
 * of content chunks.
 */
function stream(agent: http.Agent, url: string, body: string): Promise<{ firstChunkMs: number; chunks: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${url}/v1/chat/completions`,
      { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (response) => {
        if (response.statusCode !== 200) {
          response.resume();
          reject(new Error(`HTTP ${response.statusCode} from ${url}`));
          return;
        }
        response.setEncoding("utf8");
        let first: number | undefined;
        let text = "";
        response.on("data", (piece: string) => {
          // A non-empty content string: the first chunk a user would see.
          if (first === undefined && /"content":"[^"]/.test(piece)) first = performance.now();
          text += piece;
        });
        response.on("end", () => {
          const chunks = text.match(/"content":"[^"]/g)?.length ?? 0;
          if (first === undefined || !text.includes("[DONE]")) reject(new Error(`an incomplete stream from ${url}`));
          else resolve({ firstChunkMs: first - started, chunks });
        });
        response.on("error", reject);
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

/** `requests` streams over `streams` keep-alive connections, each starting its next request when its last one ended. */
async function load(
  url: string,
  model: string,
  streams: number,
  requests: number,
  processes: Record<string, RunningProcess>,
): Promise<Round> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: streams });
  const body = JSON.stringify({
    model,
    messages: [{ role: "user", content: "Tell me about the harbour town." }],
    max_tokens: 64,
    stream: true,
    stream_options: { include_usage: true },
  });
  const firstChunkMs: number[] = [];
  let chunks = 0;
  let sent = 0;
  const cpuBefore = new Map(await Promise.all(Object.entries(processes).map(async ([name, p]) => [name, await p.cpuSeconds()] as const)));
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: streams }, async () => {
      while (sent < requests) {
        sent++;
        const result = await stream(agent, url, body);
        firstChunkMs.push(result.firstChunkMs);
        chunks += result.chunks;
      }
    }),
  );
  const wallMs = performance.now() - started;
  const client = process.cpuUsage(clientBefore);
  const cpuS = new Map(
    await Promise.all(Object.entries(processes).map(async ([name, p]) => [name, (await p.cpuSeconds()) - cpuBefore.get(name)!] as const)),
  );
  agent.destroy();
  return { firstChunkMs, wallMs, chunks, clientCpuS: (client.user + client.system) / 1e6, cpuS };
}

async function benchOverhead(run: ModelRun, options: GatewayOptions["overhead"], dir: string): Promise<void> {
  for (const upstreamCase of options.upstreams) await overheadCase(run, options, upstreamCase, dir);
}

/** One fake upstream (`intervalMs` between its chunks; 0: back to back), direct and through a gateway, taking turns. */
async function overheadCase(
  run: ModelRun,
  options: GatewayOptions["overhead"],
  { intervalMs, requests, streams = options.streams }: GatewayOptions["overhead"]["upstreams"][number],
  dir: string,
): Promise<void> {
  const upstreamName = intervalMs > 0 ? `paced_${intervalMs}ms` : "burst";
  const upstream = await startScript(
    path.join(import.meta.dirname, "fakeUpstream.ts"),
    ["--chunks", String(options.chunks), "--interval-ms", String(intervalMs)],
    "the fake upstream",
  );
  let gateway: RunningProcess | undefined;
  try {
    gateway = await startGateway(run, dir, {
      fake: { endpoints: [{ url: `${upstream.url}/v1`, maxConcurrent: 100_000 }] },
    });
    const paths: Array<{ key: "direct" | "gateway"; url: string; processes: Record<string, RunningProcess> }> = [
      { key: "direct", url: upstream.url, processes: { upstream } },
      { key: "gateway", url: gateway.url, processes: { upstream, gateway } },
    ];
    // Warm-up: connections, the JIT of every path.
    for (const each of paths) await load(each.url, "fake", streams, requests, each.processes);
    const rounds = new Map<"direct" | "gateway", Round[]>(paths.map((each) => [each.key, []]));
    for (let round = 0; round < options.rounds; round++) {
      for (let i = 0; i < paths.length; i++) {
        const each = paths[(i + round) % paths.length]!;
        await quiet();
        rounds.get(each.key)!.push(await load(each.url, "fake", streams, requests, each.processes));
      }
    }
    const name = (key: "direct" | "gateway", stat: GatewayStat) => names.gatewayOverhead(upstreamName, streams, key, stat);
    const pacing = intervalMs > 0 ? `${intervalMs} ms apart` : "back to back";
    console.log(
      `\n### gateway overhead: ${streams} concurrent streams of ${options.chunks} chunks from a fake upstream, ${pacing}; ${requests} requests a round, ${options.rounds} rounds\n`,
    );
    console.log("| path | first chunk p50 | p99 | requests/s | chunks/s | CPU a request: gateway / upstream / client |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (const [key, all] of rounds) {
      const firsts = all.flatMap((r) => r.firstChunkMs);
      const wallS = all.reduce((sum, r) => sum + r.wallMs, 0) / 1000;
      const perRequest = (seconds: number) => (seconds * 1e6) / firsts.length;
      const cpu = (process: string) => perRequest(all.reduce((sum, r) => sum + (r.cpuS.get(process) ?? 0), 0));
      run.figures.set(name(key, "first_chunk_p50_ms"), percentile(firsts, 50));
      run.figures.set(name(key, "first_chunk_p99_ms"), percentile(firsts, 99));
      run.figures.set(name(key, "requests_s"), firsts.length / wallS);
      run.figures.set(name(key, "chunks_s"), all.reduce((sum, r) => sum + r.chunks, 0) / wallS);
      if (key === "gateway") run.figures.set(name(key, "gateway_cpu_us_per_request"), cpu("gateway"));
      run.figures.set(name(key, "upstream_cpu_us_per_request"), cpu("upstream"));
      run.figures.set(name(key, "client_cpu_us_per_request"), perRequest(all.reduce((sum, r) => sum + r.clientCpuS, 0)));
      const get = (stat: GatewayStat) => run.figures.get(name(key, stat))!;
      const gatewayCpu = key === "gateway" ? get("gateway_cpu_us_per_request").toFixed(0) : "—";
      console.log(
        `| ${key} | ${get("first_chunk_p50_ms").toFixed(2)} ms | ${get("first_chunk_p99_ms").toFixed(2)} ms | ${get("requests_s").toFixed(0)} | ${get("chunks_s").toFixed(0)} | ${gatewayCpu} / ${get("upstream_cpu_us_per_request").toFixed(0)} / ${get("client_cpu_us_per_request").toFixed(0)} µs |`,
      );
    }
    const added = (stat: "first_chunk_p50_ms" | "first_chunk_p99_ms") =>
      run.figures.get(name("gateway", stat))! - run.figures.get(name("direct", stat))!;
    run.figures.set(names.gatewayAdded(upstreamName, streams, "first_chunk_p50_added_ms"), added("first_chunk_p50_ms"));
    run.figures.set(names.gatewayAdded(upstreamName, streams, "first_chunk_p99_added_ms"), added("first_chunk_p99_ms"));
    run.figures.ratio(names.gatewayThroughputRatio(upstreamName, streams), name("gateway", "requests_s"), name("direct", "requests_s"));
    console.log(
      `\nadded by the gateway: ${added("first_chunk_p50_ms").toFixed(2)} ms at p50, ${added("first_chunk_p99_ms").toFixed(2)} ms at p99; throughput ${run.figures.get(names.gatewayThroughputRatio(upstreamName, streams))!.toFixed(3)}× direct`,
    );
  } finally {
    await gateway?.stop();
    await upstream.stop();
  }
}
