import { once } from "node:events";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 34's fault tests, on loopback: a gateway (in process) in front of modelhost workers run as
 * processes of their own, which the tests kill (SIGKILL), hang (SIGSTOP) or stand in for with a
 * server that answers 500s. What a client sees: a request that had not started streaming never
 * fails (it goes to another worker); a stream that had started on the failed worker ends with its
 * protocol's error event, and a request not streamed that was running there gets a 503 in its
 * protocol's error shape. /metrics counts every attempt once, and gives every endpoint back.
 *
 * The tests run in order on the same workers: the second uses the two the first left alive.
 */
describe("a gateway's upstream workers failing under load", () => {
  let dir: string;
  let workers: ServerProcess[] = [];
  const dead = new Set<ServerProcess>();
  const gateways: TestServer[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-fleet-faults-"));
    // long-tiny with a context of 32,768 tokens: a stream asked for 30,000 tokens decodes for tens
    // of seconds, so a stream is still under way whenever a test fails its worker. 3 slots each.
    await mkdir(path.join(dir, "models"));
    await symlink(await testModelPath("long-tiny"), path.join(dir, "models", "tiny.gguf"));
    workers = await Promise.all(
      ["a", "b", "c"].map((name) =>
        startServerProcess([
          ...["--models-dir", path.join(dir, "models"), "--data-dir", path.join(dir, `data-${name}`)],
          ...["--parallel", "3", "--context-size", "32768", "--log-level", "warn"],
        ]),
      ),
    );
  });
  afterAll(async () => {
    // SIGKILL: a worker stopped by a failed test would not answer SIGTERM; these hold nothing to
    // flush. Then the gateways' streams end at once.
    for (const worker of workers) await worker.kill();
    for (const gateway of gateways) await gateway.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A gateway serving `remote` from `urls` (each up to 8 requests at once: more than a worker's 3 slots, so some wait there). */
  async function startGateway(name: string, urls: string[], config: Record<string, unknown> = {}): Promise<TestServer> {
    const file = path.join(dir, `${name}.json`);
    await writeFile(
      file,
      JSON.stringify({ models: { remote: { model: "tiny", endpoints: urls.map((url) => ({ url, maxConcurrent: 8 })) } } }),
    );
    const gateway = await startTestServer({ config: { upstreams: file, shutdownGrace: 1_000, ...config } });
    gateways.push(gateway);
    return gateway;
  }

  it("kill a worker under load: no request that had not started fails; those that had end with the protocol's error", async () => {
    const urls = workers.map((worker) => `${worker.url}/v1`);
    const gateway = await startGateway("kill", urls);
    // The worker the test kills holds 7 conversations: 3 running (an OpenAI stream, an Anthropic
    // stream, a request not streamed), 2 waiting for a slot, and 2 sent after the kill. Each other
    // worker runs 3 (two streams, one not streamed), and gets 1 more conversation after the kill.
    const prefer = await conversationsByEndpoint(gateway, urls, "Kill", (counts) => {
      const sorted = [...counts].sort((a, b) => b - a);
      return sorted[0]! >= 7 && sorted[2]! >= 4;
    });
    const victimIndex = [...prefer.values()].findIndex((list) => list.length >= 7);
    const victim = workers[victimIndex]!;
    const others = workers.filter((worker) => worker !== victim);
    const take = (worker: ServerProcess) => prefer.get(`${worker.url}/v1`)!.shift()!;

    const lengths = { long: 30_000, short: 1_000, after: 200 };
    // Launched in turn across the workers: each is then within its bounded share of the load
    // (1.25 × the mean, EndpointPool), so each goes to the worker its conversation prefers.
    const [v1, o1, p1] = [
      await placed(workers, victim, "active", () => openaiStream(gateway, take(victim), lengths.long)),
      await placed(workers, others[0]!, "active", () => openaiStream(gateway, take(others[0]!), lengths.short)),
      await placed(workers, others[1]!, "active", () => openaiStream(gateway, take(others[1]!), lengths.short)),
    ];
    const [v2, o2, p2] = [
      await placed(workers, victim, "active", () => anthropicStream(gateway, take(victim), lengths.long)),
      await placed(workers, others[0]!, "active", () => openaiStream(gateway, take(others[0]!), lengths.short)),
      await placed(workers, others[1]!, "active", () => openaiStream(gateway, take(others[1]!), lengths.short)),
    ];
    const [v3, o3, p3] = [
      await placed(workers, victim, "active", () => launched(plain(gateway, take(victim), lengths.long))),
      await placed(workers, others[0]!, "active", () => launched(plain(gateway, take(others[0]!), lengths.short))),
      await placed(workers, others[1]!, "active", () => launched(plain(gateway, take(others[1]!), lengths.short))),
    ];
    // Sent to the victim, waiting there for one of its 3 slots: not started.
    const waiting = [
      await placed(workers, victim, "queued", () => launched(plain(gateway, take(victim), lengths.after))),
      await placed(workers, victim, "queued", () => openaiStream(gateway, take(victim), lengths.after)),
    ];
    await Promise.all([v1.firstContent, v2.firstContent]);
    // Its 3 requests are still running (30,000 tokens take far longer), its 2 still waiting.
    expect(await load(victim)).toEqual({ active: 3, queued: 2 });
    const before = await scrape(gateway);

    await victim.kill();
    dead.add(victim);
    // Sent at once after the kill: 2 prefer the dead worker (each tries it, or not at all once the
    // gateway has taken it out).
    const after = [
      clientStream(gateway, take(victim), lengths.after),
      plain(gateway, take(victim), lengths.after),
      clientStream(gateway, take(others[0]!), lengths.after),
      plain(gateway, take(others[1]!), lengths.after),
    ];

    // The streams on the killed worker: some text, then the protocol's error event, no [DONE].
    const cut = await v1.done;
    expect(cut.contentChunks).toBeGreaterThan(0);
    expect(cut.done).toBe(false);
    expect(cut.error).toEqual({
      error: {
        message: expect.stringMatching(/^The upstream endpoint #\d serving `remote` failed mid-stream: /),
        type: "server_error",
        param: null,
        code: "engine_unavailable",
      },
    });
    const anthropicCut = await v2.done;
    expect(anthropicCut.deltas).toBeGreaterThan(0);
    expect(anthropicCut.events.at(-1)).toEqual({
      event: "error",
      data: { type: "error", error: { type: "overloaded_error", message: expect.stringContaining("failed mid-stream") } },
    });
    expect(anthropicCut.events.map((event) => event.event)).not.toContain("message_stop");
    // Not streamed, running there: a 503 in the OpenAI shape (it had started).
    const failed = await v3.done;
    expect(failed.error).toMatchObject({
      status: 503,
      error: { type: "server_error", param: null, code: "engine_unavailable", message: expect.stringContaining("failed mid-stream") },
    });

    // Every other request completes: those on the other workers, those that were waiting on the
    // killed one, those sent after the kill.
    for (const stream of [o1, p1, o2, p2]) {
      const ended = await stream.done;
      expect(ended).toEqual({ contentChunks: expect.any(Number), done: true, finishReason: "length" });
    }
    for (const reply of [o3, p3]) expect(await reply.done).toMatchObject({ finishReason: "length", completionTokens: lengths.short });
    for (const result of [await waiting[0]!.done, ...(await Promise.all(after.filter((_, i) => i % 2 === 1)))]) {
      expect(result).toMatchObject({ finishReason: "length", completionTokens: lengths.after });
    }
    expect(await waiting[1]!.done).toEqual({ contentChunks: expect.any(Number), done: true, finishReason: "length" });
    for (const result of await Promise.all(after.filter((_, i) => i % 2 === 0))) {
      expect(result).toMatchObject({ finishReason: "length", completionTokens: lengths.after });
    }

    // /metrics: each of the 12 requests that completed counted once, as an answer of a live
    // worker; the killed one's failures are the 3 cut and the tries of those not started (the 2
    // waiting, and those sent after the kill that tried it before it was out). Nothing in flight.
    const metrics = await scrape(gateway);
    const delta = (series: string) => metrics(series) - before(series);
    const series = (url: string, outcome: string) =>
      `modelhost_upstream_requests_total{model="remote",endpoint="${url}",outcome="${outcome}"}`;
    const victimUrl = `${victim.url}/v1`;
    const otherUrls = others.map((worker) => `${worker.url}/v1`);
    expect(otherUrls.reduce((sum, url) => sum + delta(series(url, "ok")), 0)).toBe(12);
    expect(otherUrls.map((url) => delta(series(url, "error")))).toEqual([0, 0]);
    expect(delta(series(victimUrl, "ok"))).toBe(0);
    expect(delta(series(victimUrl, "error"))).toBeGreaterThanOrEqual(5);
    expect(delta(series(victimUrl, "error"))).toBeLessThanOrEqual(7);
    expect(metrics(`modelhost_upstream_endpoint_up{model="remote",endpoint="${victimUrl}"}`)).toBe(0);
    for (const url of urls) expect(metrics(`modelhost_upstream_in_flight{model="remote",endpoint="${url}"}`)).toBe(0);
  }, 90_000);

  it("a hung worker: its requests time out to another worker, its stream ends with an error event, the health check takes it out and back", async () => {
    const alive = workers.filter((worker) => !dead.has(worker)).slice(0, 2);
    const urls = alive.map((worker) => `${worker.url}/v1`);
    // 2 s to the first chunk and between chunks: a worker that decodes answers within
    // milliseconds; one that is stopped never does. Checks every second (each waits up to 1 s).
    const gateway = await startGateway("hang", urls, {
      upstreamFirstByteTimeout: 2_000,
      upstreamIdleTimeout: 2_000,
      upstreamHealthInterval: 1_000,
    });
    const prefer = await conversationsByEndpoint(gateway, urls, "Hang", (counts) => counts[0]! >= 4 && counts[1]! >= 2);
    const [hung, other] = alive as [ServerProcess, ServerProcess];
    const hungUrl = urls[0]!;
    const hungConversations = prefer.get(hungUrl)!;
    const [streaming, ...later] = hungConversations as [string, ...string[]];

    // A stream on the worker that will hang, and two on the other, running across the hang.
    const cut = await placed(alive, hung, "active", () => openaiStream(gateway, streaming, 30_000));
    const steady = [
      await placed(alive, other, "active", () => openaiStream(gateway, prefer.get(urls[1]!)![0]!, 3_000)),
      await placed(alive, other, "active", () => openaiStream(gateway, prefer.get(urls[1]!)![1]!, 3_000)),
    ];
    await cut.firstContent;
    const before = await scrape(gateway);
    const series = (url: string, outcome: string) =>
      `modelhost_upstream_requests_total{model="remote",endpoint="${url}",outcome="${outcome}"}`;

    hung.signal("SIGSTOP");
    try {
      // At once, before a health check can fail (it waits 1 s for an answer): these go to the
      // hung worker, whose kernel takes the connection while nothing answers.
      const sent = [clientStream(gateway, later[0]!, 20), plain(gateway, later[1]!, 20), plain(gateway, later[2]!, 20)];
      await expect
        .poll(async () => (await scrape(gateway))(`modelhost_upstream_in_flight{model="remote",endpoint="${hungUrl}"}`), {
          timeout: 1_000,
          interval: 20,
        })
        .toBe(4);
      // Each waits out the first-byte timeout, then the other worker answers it.
      for (const result of await Promise.all(sent)) expect(result).toMatchObject({ finishReason: "length", completionTokens: 20 });
      // The stream under way ends with the error event once no chunk came for the idle timeout.
      const ended = await cut.done;
      expect(ended.contentChunks).toBeGreaterThan(0);
      expect(ended.done).toBe(false);
      expect(ended.error).toMatchObject({
        error: {
          type: "server_error",
          code: "engine_unavailable",
          message: expect.stringMatching(/failed mid-stream: no chunk for 2000 ms/),
        },
      });
      // The health check has taken it out: later requests that prefer it go to the other worker
      // at once, without a try on it (its count of errors stays as it was).
      const up = (metrics: Metrics) => metrics(`modelhost_upstream_endpoint_up{model="remote",endpoint="${hungUrl}"}`);
      await expect.poll(async () => up(await scrape(gateway)), { timeout: 5_000, interval: 50 }).toBe(0);
      const errorsWhileOut = (await scrape(gateway))(series(hungUrl, "error"));
      for (const result of await Promise.all([plain(gateway, later[0]!, 20), plain(gateway, later[1]!, 20)])) {
        expect(result).toMatchObject({ finishReason: "length", completionTokens: 20 });
      }
      const out = await scrape(gateway);
      expect(out(series(hungUrl, "error"))).toBe(errorsWhileOut);
      // 1 stream cut and 3 first-byte timeouts: every error on it, each counted once.
      expect(out(series(hungUrl, "error")) - before(series(hungUrl, "error"))).toBe(4);
      expect(out(series(hungUrl, "ok")) - before(series(hungUrl, "ok"))).toBe(0);

      hung.signal("SIGCONT");
      // Back in its pool by the next health check, and its conversations go to it again.
      await expect.poll(async () => up(await scrape(gateway)), { timeout: 5_000, interval: 50 }).toBe(1);
      const back = await scrape(gateway);
      for (const result of await Promise.all([plain(gateway, later[0]!, 20), plain(gateway, later[1]!, 20)])) {
        expect(result).toMatchObject({ finishReason: "length", completionTokens: 20 });
      }
      for (const stream of steady)
        expect(await stream.done).toEqual({ contentChunks: expect.any(Number), done: true, finishReason: "length" });
      const end = await scrape(gateway);
      expect(end(series(hungUrl, "ok")) - back(series(hungUrl, "ok"))).toBe(2);
      // The other worker answered everything else: the 2 steady streams, the 3 retried, the 2 sent while it was out.
      expect(end(series(urls[1]!, "ok")) - before(series(urls[1]!, "ok"))).toBe(7);
      expect(end(series(urls[1]!, "error")) - before(series(urls[1]!, "error"))).toBe(0);
      for (const url of urls) expect(end(`modelhost_upstream_in_flight{model="remote",endpoint="${url}"}`)).toBe(0);
      // The hung worker gave back the slot of the stream the gateway left, and none of the requests
      // the gateway gave up on while it was stopped (their connections closed) holds one.
      await expect.poll(() => load(hung), { timeout: 5_000, interval: 50 }).toEqual({ active: 0, queued: 0 });
    } finally {
      hung.signal("SIGCONT");
    }
  }, 60_000);

  it("a worker that answers 500s: taken out after 3 failures (passively) or by its health check, back once it recovers; no request fails", async () => {
    const [worker] = workers.filter((candidate) => !dead.has(candidate)) as [ServerProcess];
    const fake = await startFakeUpstream();
    try {
      const urls = [fake.url, `${worker.url}/v1`];
      // Passive health only: the pool learns of the 500s from the requests themselves.
      const passive = await startGateway("passive", urls, { upstreamHealthInterval: 0 });
      // Counted from here: a gateway starting asks each endpoint for one token (its usage check).
      fake.chats = 0;
      fake.failing = true;
      // Conversations in turn until 3 found the failing server first (about half prefer it):
      // each of those was answered by the worker, and the third took the server out.
      const preferring: string[] = [];
      let sent = 0;
      while (fake.chats < 3) {
        const hits = fake.chats;
        const content = `Flaky ${sent++}: a question.`;
        expect(await plain(passive, content, 2)).toMatchObject({ finishReason: "length" });
        if (fake.chats > hits) preferring.push(content);
        if (sent > 40) throw new Error("no conversation preferred the failing server");
      }
      let metrics = await scrape(passive);
      const series = (url: string, outcome: string) =>
        `modelhost_upstream_requests_total{model="remote",endpoint="${url}",outcome="${outcome}"}`;
      expect(metrics(series(fake.url, "error"))).toBe(3);
      expect(metrics(series(urls[1]!, "ok"))).toBe(sent);
      expect(metrics(`modelhost_upstream_endpoint_up{model="remote",endpoint="${fake.url}"}`)).toBe(0);
      // Out: the conversations that prefer it go to the worker without trying it.
      for (const content of preferring) expect(await plain(passive, content, 2)).toMatchObject({ finishReason: "length" });
      expect(fake.chats).toBe(3);

      // Recovered: after its 5 s out, one request tries it again (half-open) and it answers.
      fake.failing = false;
      await expect
        .poll(
          async () => {
            expect(await plain(passive, preferring[0]!, 2)).toMatchObject({ finishReason: expect.any(String) });
            return fake.chats;
          },
          { timeout: 10_000, interval: 200 },
        )
        .toBe(4);
      for (const content of preferring) expect(await plain(passive, content, 2)).toMatchObject({ text: "Hi", finishReason: "stop" });
      expect(fake.chats).toBe(7);
      metrics = await scrape(passive);
      expect(metrics(series(fake.url, "ok"))).toBe(4);
      expect(metrics(`modelhost_upstream_endpoint_up{model="remote",endpoint="${fake.url}"}`)).toBe(1);

      // Active health checks: its GET /models fails too, so it is out before any request finds out.
      const checked = await startGateway("checked", urls, { upstreamHealthInterval: 100 });
      fake.chats = 0;
      const up = async () => (await scrape(checked))(`modelhost_upstream_endpoint_up{model="remote",endpoint="${fake.url}"}`);
      fake.failing = true;
      await expect.poll(up, { timeout: 5_000, interval: 50 }).toBe(0);
      for (const content of preferring) expect(await plain(checked, content, 2)).toMatchObject({ finishReason: "length" });
      expect(fake.chats).toBe(0);
      fake.failing = false;
      await expect.poll(up, { timeout: 5_000, interval: 50 }).toBe(1);
      for (const content of preferring) expect(await plain(checked, content, 2)).toMatchObject({ text: "Hi" });
      expect(fake.chats).toBe(3);
      expect((await scrape(checked))(series(fake.url, "error"))).toBe(0);
    } finally {
      await fake.close();
    }
  }, 60_000);
});

type Metrics = (series: string) => number;

/** The gateway's /metrics, as a lookup of one series' value (0 when absent). */
async function scrape(gateway: TestServer): Promise<Metrics> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  return (series) => Number(new RegExp(`^${series.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
}

/**
 * Conversations (first user messages) by the endpoint their hash prefers, found by sending each
 * alone (nothing else in flight: it goes to the endpoint it prefers) and seeing which endpoint's
 * count of answers rose, until `enough` holds for the counts in `urls`' order.
 */
async function conversationsByEndpoint(
  gateway: TestServer,
  urls: string[],
  tag: string,
  enough: (counts: number[]) => boolean,
): Promise<Map<string, string[]>> {
  const found = new Map(urls.map((url) => [url, [] as string[]]));
  let before = await scrape(gateway);
  for (let i = 0; !enough(urls.map((url) => found.get(url)!.length)); i++) {
    if (i >= 60) throw new Error(`60 conversations did not spread as needed: ${JSON.stringify([...found])}`);
    const content = `${tag} conversation ${i}: tell me a long story.`;
    await gateway.client.chat.completions.create({ model: "remote", max_tokens: 1, messages: [{ role: "user", content }] });
    const after = await scrape(gateway);
    const url = urls.find((url) => {
      const series = `modelhost_upstream_requests_total{model="remote",endpoint="${url}",outcome="ok"}`;
      return after(series) > before(series);
    })!;
    found.get(url)!.push(content);
    before = after;
  }
  return found;
}

interface Load {
  active: number;
  queued: number;
}

/** A worker's requests decoding and waiting for a slot, from its /health. */
async function load(worker: ServerProcess): Promise<Load> {
  const health = (await (await fetch(`${worker.url}/health`, { signal: AbortSignal.timeout(5_000) })).json()) as { loaded: Load[] };
  return health.loaded.reduce((sum, model) => ({ active: sum.active + model.active, queued: sum.queued + model.queued }), {
    active: 0,
    queued: 0,
  });
}

/**
 * Starts a request and waits until it shows on `expected` (among `workers`) as `state`: decoding,
 * or waiting for a slot. Throws if it shows on another worker instead (requests ending elsewhere
 * meanwhile do not count).
 */
async function placed<T>(workers: ServerProcess[], expected: ServerProcess, state: keyof Load, start: () => T): Promise<T> {
  const total = (load: Load) => load.active + load.queued;
  const before = await Promise.all(workers.map(load));
  const started = start();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const now = await Promise.all(workers.map(load));
    const grew = workers.filter((_, i) => total(now[i]!) > total(before[i]!));
    if (grew.length > 0) {
      const index = workers.indexOf(expected);
      if (grew.length !== 1 || grew[0] !== expected || now[index]![state] !== before[index]![state] + 1) {
        throw new Error(`The request did not land ${state} on ${expected.url}: ${JSON.stringify({ before, now })}`);
      }
      return started;
    }
    if (Date.now() > deadline) throw new Error(`The request did not reach a worker within 10 s: ${JSON.stringify(now)}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const ask = (content: string, maxTokens: number) => ({
  model: "remote",
  max_tokens: maxTokens,
  temperature: 0.8,
  messages: [{ role: "user" as const, content }],
});

interface Plain {
  text?: string;
  finishReason?: string;
  completionTokens?: number;
  error?: unknown;
}

/** A request not streamed, through the official client (no retries): its reply, or the error it raised. */
async function plain(gateway: TestServer, content: string, maxTokens: number): Promise<Plain> {
  try {
    const reply = await gateway.client.chat.completions.create(ask(content, maxTokens));
    return {
      text: reply.choices[0]!.message.content!,
      finishReason: reply.choices[0]!.finish_reason,
      completionTokens: reply.usage!.completion_tokens,
    };
  } catch (error) {
    return { error };
  }
}

/**
 * A request under way, as a non-thenable object: an async function that returned the promise
 * itself would wait for it to settle.
 */
function launched<T>(done: Promise<T>): { done: Promise<T> } {
  return { done };
}

/** A stream through the official client: how it finished (it raises on an error event). */
async function clientStream(gateway: TestServer, content: string, maxTokens: number): Promise<Plain> {
  try {
    const stream = await gateway.client.chat.completions.create({
      ...ask(content, maxTokens),
      stream: true,
      stream_options: { include_usage: true },
    });
    const result: Plain = {};
    for await (const chunk of stream) {
      result.finishReason ??= chunk.choices[0]?.finish_reason ?? undefined;
      if (chunk.usage) result.completionTokens = chunk.usage.completion_tokens;
    }
    return result;
  } catch (error) {
    return { error };
  }
}

/** Server-sent events as they arrive: each event's `event:` name (if any) and data. */
async function* sseEvents(response: Response): AsyncGenerator<{ event?: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body!) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (block.startsWith(":")) continue;
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1] ?? "";
      yield event === undefined ? { data } : { event, data };
    }
  }
}

interface RawStream<T> {
  /** Resolves once the first piece of text came: the stream is the worker's now. */
  firstContent: Promise<void>;
  done: Promise<T>;
}

/** Resolves `firstContent` on the first call of `mark`, rejects it if the stream ends without one. */
function contentSignal(): { promise: Promise<void>; mark: () => void; end: () => void } {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  promise.catch(() => {});
  return { promise, mark: () => resolve(), end: () => reject(new Error("the stream ended before any text")) };
}

/** An OpenAI chat completion stream over raw fetch, to see its events as sent. */
function openaiStream(
  gateway: TestServer,
  content: string,
  maxTokens: number,
): RawStream<{ contentChunks: number; done: boolean; finishReason?: string; error?: unknown }> {
  const first = contentSignal();
  const done = (async () => {
    const response = await postJson(`${gateway.url}/v1/chat/completions`, { ...ask(content, maxTokens), stream: true });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    const result: { contentChunks: number; done: boolean; finishReason?: string; error?: unknown } = { contentChunks: 0, done: false };
    for await (const { data } of sseEvents(response)) {
      if (data === "[DONE]") {
        result.done = true;
        continue;
      }
      const chunk = JSON.parse(data) as { error?: unknown; choices?: Array<{ delta: { content?: string }; finish_reason: string | null }> };
      if (chunk.error) result.error = chunk;
      if (chunk.choices?.[0]?.delta.content) {
        result.contentChunks++;
        first.mark();
      }
      result.finishReason = chunk.choices?.[0]?.finish_reason ?? result.finishReason;
    }
    return result;
  })().finally(first.end);
  return { firstContent: first.promise, done };
}

/** An Anthropic Messages stream over raw fetch: its named events. */
function anthropicStream(
  gateway: TestServer,
  content: string,
  maxTokens: number,
): RawStream<{ deltas: number; events: Array<{ event: string | undefined; data: unknown }> }> {
  const first = contentSignal();
  const done = (async () => {
    const response = await postJson(`${gateway.url}/v1/messages`, { ...ask(content, maxTokens), stream: true });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
    const result = { deltas: 0, events: [] as Array<{ event: string | undefined; data: unknown }> };
    for await (const { event, data } of sseEvents(response)) {
      result.events.push({ event, data: JSON.parse(data) });
      if (event === "content_block_delta") {
        result.deltas++;
        first.mark();
      }
    }
    return result;
  })().finally(first.end);
  return { firstContent: first.promise, done };
}

interface FakeUpstream {
  url: string;
  /** While true, every request (GET /models too) gets a 500. */
  failing: boolean;
  /** Chat completion requests it received. */
  chats: number;
  close(): Promise<void>;
}

/** An OpenAI-compatible server on loopback that answers 500s while `failing`, else a short streamed reply ("Hi") with usage. */
async function startFakeUpstream(): Promise<FakeUpstream> {
  const fake = { failing: false, chats: 0 } as FakeUpstream;
  const server: Server = createServer((request, response) => {
    request.resume();
    if (request.url?.endsWith("/chat/completions")) fake.chats++;
    if (fake.failing) {
      response.writeHead(500, { "content-type": "application/json" }).end('{"error":{"message":"broken","type":"server_error"}}');
      return;
    }
    if (request.url?.endsWith("/models")) {
      response.writeHead(200, { "content-type": "application/json" }).end('{"object":"list","data":[{"id":"tiny","object":"model"}]}');
      return;
    }
    const base = { id: "chatcmpl-fake", object: "chat.completion.chunk", created: 0, model: "tiny" };
    const chunks = [
      { ...base, choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] },
      { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] },
      { ...base, choices: [], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } },
    ];
    response.writeHead(200, { "content-type": "text/event-stream" });
    response.end(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("") + "data: [DONE]\n\n");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  fake.close = async () => {
    server.closeAllConnections();
    server.close();
    await once(server, "close");
  };
  return fake;
}
