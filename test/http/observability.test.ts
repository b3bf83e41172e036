// Issue 16, Observability: GET /metrics (Prometheus text), request ids in x-request-id, one
// summary log line per generation whatever the protocol, and no secrets in the logs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { postJson, readSseEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
function parseMetrics(text: string): Sample[] {
  return text
    .split("\n")
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => {
      const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!match) throw new Error(`not a sample: ${line}`);
      const labels = Object.fromEntries(
        [...(match[2] ?? "").matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((label) => [label[1], label[2]]),
      );
      return { name: match[1]!, labels, value: Number(match[3]) };
    });
}

/** The sum of the samples of a metric whose labels include `labels`. */
function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))
    .reduce((sum, sample) => sum + sample.value, 0);
}

/** The value of the one sample of a metric whose labels include `labels`: the series must exist (total() reads a missing one as 0). */
function only(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const matching = samples.filter(
    (sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  expect(matching, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
  return matching[0]!.value;
}

const messages = [{ role: "user" as const, content: "Hello there." }];

describe("observability, local profile", () => {
  let server: TestServer;
  const logs: Record<string, unknown>[] = [];

  beforeAll(async () => {
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), embed: await testModelPath("embed-tiny") },
      config: { logLevel: "info" },
      logDestination: { write: (line) => void logs.push(JSON.parse(line) as Record<string, unknown>) },
    });
  });
  afterAll(async () => server?.close());

  const scrape = async () => {
    const response = await fetch(`${server.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseMetrics(await response.text());
  };

  it("counts requests by route pattern, status and model, tokens, latencies, and what the engine holds", async () => {
    const plain = await server.client.chat.completions.create({ model: "tiny", messages, max_tokens: 8 });
    const stream = await server.client.chat.completions.create({
      model: "tiny",
      messages,
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamedTokens = 0;
    for await (const chunk of stream) streamedTokens += chunk.usage?.completion_tokens ?? 0;
    const native = (await (
      await postJson(`${server.url}/api/chat`, { model: "tiny", messages, stream: false, options: { num_predict: 8 } })
    ).json()) as { eval_count: number };
    const embedded = await server.client.embeddings.create({ model: "embed", input: "lighthouse" });
    await fetch(`${server.url}/v1/models/tiny`);
    await postJson(`${server.url}/v1/chat/completions`, { model: "no-such-model", messages });
    await fetch(`${server.url}/no/such/url/${"x".repeat(50)}`);

    const samples = await scrape();
    const requests = "modelhost_http_requests_total";
    expect(total(samples, requests, { route: "/v1/chat/completions", method: "POST", status: "200", model: "tiny" })).toBe(2);
    expect(total(samples, requests, { route: "/api/chat", status: "200", model: "tiny" })).toBe(1);
    expect(total(samples, requests, { route: "/v1/embeddings", status: "200", model: "embed" })).toBe(1);
    // The pattern, not the URL; a model name the server does not know is no label.
    expect(total(samples, requests, { route: "/v1/models/*", method: "GET", status: "200" })).toBe(1);
    expect(total(samples, requests, { route: "/v1/chat/completions", status: "404", model: "" })).toBe(1);
    expect(total(samples, requests, { route: "unmatched", status: "404" })).toBe(1);
    expect(samples.some((sample) => sample.labels.model === "no-such-model" || sample.labels.route?.includes("xxx"))).toBe(false);

    const completionTokens = (plain.usage?.completion_tokens ?? 0) + streamedTokens + native.eval_count;
    expect(total(samples, "modelhost_completion_tokens_total", { model: "tiny" })).toBe(completionTokens);
    expect(total(samples, "modelhost_prompt_tokens_total", { model: "embed" })).toBe(embedded.usage.prompt_tokens);
    expect(total(samples, "modelhost_generations_total", { model: "tiny" })).toBe(3);
    expect(total(samples, "modelhost_time_to_first_token_seconds_count", { model: "tiny" })).toBe(3);
    expect(total(samples, "modelhost_inter_token_latency_seconds_count", { model: "tiny" })).toBeGreaterThan(0);
    expect(total(samples, "modelhost_generation_tokens_per_second_count", { model: "tiny" })).toBeGreaterThan(0);

    expect(total(samples, "modelhost_loaded_models")).toBe(2);
    expect(only(samples, "modelhost_active_sequences", { model: "tiny" })).toBe(0);
    expect(only(samples, "modelhost_queue_depth", { model: "tiny" })).toBe(0);
    expect(only(samples, "modelhost_model_load_seconds", { model: "tiny" })).toBeGreaterThan(0);
    // The default process metrics.
    expect(samples.some((sample) => sample.name === "process_cpu_user_seconds_total")).toBe(true);
    expect(samples.some((sample) => sample.name === "nodejs_heap_size_used_bytes")).toBe(true);
    // Sampled every 100 ms rather than prom-client's 10 (metrics.ts), but still reported.
    expect(samples.some((sample) => sample.name === "nodejs_eventloop_lag_p99_seconds")).toBe(true);
  });

  it("returns a request id in x-request-id, keeping a well-formed incoming one", async () => {
    const generated = await fetch(`${server.url}/v1/models`);
    expect(generated.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    const kept = await fetch(`${server.url}/v1/models`, { headers: { "x-request-id": "nginx-4f2a9c:01" } });
    expect(kept.headers.get("x-request-id")).toBe("nginx-4f2a9c:01");
    for (const bad of ["x".repeat(129), "two words", "a\u00e9b"]) {
      const replaced = await fetch(`${server.url}/v1/models`, {
        headers: { "x-request-id": encodeURIComponent(bad) === bad ? bad : bad.replace(/[^\x20-\x7e]/g, "?") },
      });
      expect(replaced.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    }
    const streamed = await postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 2, stream: true },
      { headers: { "content-type": "application/json", "x-request-id": "stream-1" } },
    );
    expect(streamed.headers.get("x-request-id")).toBe("stream-1");
    await readSseEvents(streamed);
  });

  it("logs one summary line per generation, from every protocol, under the request's id", async () => {
    logs.length = 0;
    const openai = await postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 4 },
      { headers: { "content-type": "application/json", "x-request-id": "summary-openai" } },
    );
    const openaiBody = (await openai.json()) as {
      usage: { prompt_tokens: number; completion_tokens: number };
      choices: { finish_reason: string }[];
    };
    const native = await postJson(
      `${server.url}/api/generate`,
      { model: "tiny", prompt: "Hi", stream: true, options: { num_predict: 4 } },
      { headers: { "content-type": "application/json", "x-request-id": "summary-native" } },
    );
    await native.text();
    await expect.poll(() => logs.filter((line) => line.msg === "generation finished").length).toBe(2);
    const lines = logs.filter((line) => line.msg === "generation finished");
    expect(lines.find((line) => line.reqId === "summary-openai")).toMatchObject({
      model: "tiny",
      promptTokens: openaiBody.usage.prompt_tokens,
      completionTokens: openaiBody.usage.completion_tokens,
      finishReason: openaiBody.choices[0]!.finish_reason,
      ttftMs: expect.any(Number),
      tokensPerSecond: expect.any(Number),
    });
    expect(lines.find((line) => line.reqId === "summary-native")).toMatchObject({
      model: "tiny",
      completionTokens: 4,
      finishReason: "length",
    });
    expect(lines.every((line) => line.account === undefined)).toBe(true);
  });
});

describe("observability, the engine's gauges", () => {
  let server: TestServer;

  beforeAll(async () => {
    // Two sequences: a third request waits in the queue. The tiny model's full 4,096-token context,
    // so each reply lasts seconds (~4,070 tokens) unless its client leaves.
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny") },
      config: { parallel: 2, contextSize: 4096, maxGenerationTime: 0 },
    });
  });
  afterAll(async () => server?.close());

  const gauges = async () => {
    const samples = parseMetrics(await (await fetch(`${server.url}/metrics`)).text());
    return {
      active: only(samples, "modelhost_active_sequences", { model: "tiny" }),
      queued: only(samples, "modelhost_queue_depth", { model: "tiny" }),
    };
  };

  it("shows the sequences decoding and the requests queued while streams run, and 0 once they end", async () => {
    // Loaded first, so the gauges' series exist from the first scrape.
    await server.client.chat.completions.create({ model: "tiny", messages, max_tokens: 1 });
    expect(await gauges()).toEqual({ active: 0, queued: 0 });

    const leave = new AbortController();
    const streams = Array.from({ length: 3 }, async () => {
      const response = await postJson(
        `${server.url}/v1/chat/completions`,
        { model: "tiny", messages, max_tokens: 100_000, stream: true },
        { signal: leave.signal },
      );
      await response.text();
    });
    const settled = Promise.allSettled(streams);
    await expect.poll(gauges, { timeout: 20_000, interval: 20 }).toEqual({ active: 2, queued: 1 });
    leave.abort();
    await settled;
    await expect.poll(gauges, { timeout: 10_000 }).toEqual({ active: 0, queued: 0 });
  });
});

// The gate's refusals, the ledger's figures and the log's account are the server's, not the
// model's: a fake engine.
describe("observability, hosted profile", () => {
  let hosted: Hosted;
  let token: string;
  let tightToken: string;
  const metricsToken = "scrape-secret-0123456789";
  const logs: string[] = [];
  let guarded: TestServer;
  let closed: TestServer;

  beforeAll(async () => {
    hosted = await openHosted({
      tiers: {
        default: "free",
        tiers: { free: { requestsPerMinute: 2, tokensPerDay: 150_000 }, tight: { maxInputTokens: 30, tokensPerDay: 60 } },
      },
    });
    token = (await hosted.newAccount(undefined, { name: "watched" })).token;
    tightToken = (await hosted.newAccount("tight")).token;
    const engine = () => new FakeEngine({ models: ["tiny"] });
    guarded = await hosted.serve({
      engine: engine(),
      config: { metricsToken, logLevel: "info" },
      logDestination: { write: (line) => void logs.push(line) },
    });
    closed = await hosted.serve({ engine: engine() });
  });
  afterAll(async () => {
    await hosted?.close();
  });

  const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

  it("serves /metrics only with the metrics token, and not at all without one", async () => {
    expect((await fetch(`${guarded.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${guarded.url}/metrics`, { headers: bearer(token) })).status).toBe(401);
    expect((await fetch(`${guarded.url}/metrics`, { headers: bearer(metricsToken) })).status).toBe(200);
    // No metrics token: no such route, for anyone.
    expect((await fetch(`${closed.url}/metrics`, { headers: bearer(token) })).status).toBe(404);
  });

  const scrape = async () => parseMetrics(await (await fetch(`${guarded.url}/metrics`, { headers: bearer(metricsToken) })).text());

  it("counts rate-limit refusals by kind, and shows the usage ledger's lag", async () => {
    const chat = (secret: string, body: object = {}) =>
      postJson(
        `${guarded.url}/v1/chat/completions`,
        { model: "tiny", messages, max_tokens: 2, ...body },
        { headers: { "content-type": "application/json", ...bearer(secret) } },
      );
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await chat(token)).status);
    expect(statuses).toEqual([200, 200, 429]);
    // The tight tier: a prompt over its 30 tokens per request, then a prompt plus max_tokens over its 60 a day.
    expect((await chat(tightToken, { messages: [{ role: "user", content: "lighthouse keeper ".repeat(20) }] })).status).toBe(413);
    expect((await chat(tightToken, { max_tokens: 100 })).status).toBe(429);
    const samples = await scrape();
    expect(total(samples, "modelhost_rate_limit_refusals_total", { kind: "requests_per_minute" })).toBe(1);
    expect(only(samples, "modelhost_rate_limit_refusals_total", { kind: "max_input_tokens" })).toBe(1);
    expect(only(samples, "modelhost_rate_limit_refusals_total", { kind: "tokens_per_day" })).toBe(1);
    expect(total(samples, "modelhost_http_requests_total", { route: "/v1/chat/completions", status: "429", model: "tiny" })).toBe(2);
    expect(total(samples, "modelhost_http_requests_total", { route: "/v1/chat/completions", status: "413", model: "tiny" })).toBe(1);
    expect(samples.find((sample) => sample.name === "modelhost_usage_ledger_lag_seconds")?.value).toBeGreaterThanOrEqual(0);
    expect(samples.find((sample) => sample.name === "modelhost_usage_ledger_pending_rows")).toBeDefined();
    // Within a group commit (20 ms) the two requests' usage is written: nothing pending, no lag, no
    // failed flush, and the ledger holds them. (How the lag grows while the store fails: usageBuffer.test.ts.)
    await expect
      .poll(async () => {
        const now = await scrape();
        return ["lag_seconds", "pending_rows", "failed_flushes"].map((name) => only(now, `modelhost_usage_ledger_${name}`));
      })
      .toEqual([0, 0, 0]);
    expect(await hosted.accounts.usage({ account: "watched" })).toEqual([expect.objectContaining({ model: "tiny", requests: 2 })]);
  });

  it("names the account in the generation's log line, and logs no credential", async () => {
    await expect.poll(() => logs.filter((line) => line.includes('"generation finished"')).length).toBeGreaterThan(0);
    const line = JSON.parse(logs.find((entry) => entry.includes('"generation finished"'))!) as Record<string, unknown>;
    expect(line).toMatchObject({ account: "watched", model: "tiny" });
    const all = logs.join("\n");
    expect(all).not.toContain(token);
    expect(all).not.toContain(metricsToken);
  });
});
