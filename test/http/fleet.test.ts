import { writeFile } from "node:fs/promises";
import { once } from "node:events";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import { mkdtemp, rm } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { encodePng } from "../support/images.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 34, the gateway's first part: models declared in --upstreams are served by pools of
 * OpenAI-compatible endpoints (here two modelhost workers on loopback, the tiny model), beside the
 * gateway's own in-process models, through every wire format; a conversation stays on the worker
 * that holds its prompt cache; a worker that is gone before the first byte is routed around.
 */
describe("a gateway in front of upstream workers", () => {
  let workers: TestServer[];
  let gateway: TestServer;
  let dir: string;

  beforeAll(async () => {
    const tiny = await testModelPath("tiny");
    // Slots for every conversation of the affinity test (what a worker holds is then up to the
    // routing), and a context of 32,768 tokens, which a stream the client leaves would take seconds
    // to fill: the cancellation test sees the slot free long before.
    const long = await testModelPath("long-tiny");
    const rerank = await testModelPath("rerank-tiny");
    workers = [
      await startTestServer({ models: { tiny: long, ranker: rerank }, config: { parallel: 6, contextSize: 32_768 } }),
      await startTestServer({ models: { tiny: long, ranker: rerank }, config: { parallel: 6, contextSize: 32_768 } }),
    ];
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-fleet-"));
    const upstreams = path.join(dir, "upstreams.json");
    await writeFile(
      upstreams,
      JSON.stringify({
        models: {
          remote: {
            model: "tiny",
            endpoints: workers.map((worker) => ({ url: `${worker.url}/v1`, maxConcurrent: 6 })),
            capabilities: ["chat", "embeddings"],
          },
          ranker: { capabilities: ["rerank"], endpoints: [{ url: `${workers[0]!.url}/v1` }] },
          seer: { model: "tiny", capabilities: ["chat", "vision"], endpoints: [{ url: `${workers[0]!.url}/v1` }] },
          ghost: { model: "no-such-model", endpoints: [{ url: `${workers[0]!.url}/v1` }] },
        },
      }),
    );
    gateway = await startTestServer({ models: { local: tiny }, config: { upstreams } });
  });
  afterAll(async () => {
    await gateway?.close();
    for (const worker of workers ?? []) await worker.close();
    await rm(dir, { recursive: true, force: true });
  });

  const question = (content: string) => ({
    model: "remote",
    max_tokens: 12,
    temperature: 0,
    messages: [{ role: "user" as const, content }],
  });

  it("lists its own models and the upstream ones", async () => {
    const ids = (await gateway.client.models.list()).data.map((model) => model.id).sort();
    expect(ids).toEqual(["ghost", "local", "ranker", "remote", "seer"]);
  });

  it("answers as the worker does, plain and streamed, with the worker's usage", async () => {
    const direct = await workers[0]!.client.chat.completions.create({ ...question("Tell me about the sea."), model: "tiny" });
    const through = await gateway.client.chat.completions.create(question("Tell me about the sea."));
    expect(through.choices[0]!.message.content).toBe(direct.choices[0]!.message.content);
    expect(through.model).toBe("remote");
    expect(through.usage!.prompt_tokens).toBe(direct.usage!.prompt_tokens);
    expect(through.usage!.completion_tokens).toBe(direct.usage!.completion_tokens);
    const stream = await gateway.client.chat.completions.create({ ...question("Tell me about the sea."), stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe(direct.choices[0]!.message.content);
    // Another wire format, the same upstream answer.
    const anthropic = new Anthropic({ baseURL: gateway.url, apiKey: "local", maxRetries: 0 });
    const greedy = { model: "remote", max_tokens: 12, temperature: 0 };
    const message = await anthropic.messages.create({ ...greedy, messages: [{ role: "user", content: "Tell me about the sea." }] });
    expect(message.content).toEqual([expect.objectContaining({ type: "text", text: direct.choices[0]!.message.content })]);
  });

  it("keeps each conversation on the worker that holds its prompt cache", async () => {
    // 6 conversations of 3 turns on 2 workers, their turns interleaved; each turn repeats the
    // conversation so far, replies included. Each has over 64 tokens of its own: a worker that gives
    // its slot to another conversation keeps it in its prompt cache (--cache-ram) only then.
    const conversations = Array.from(
      { length: 6 },
      (_, c) =>
        [
          {
            role: "user" as const,
            content: `Conversation ${c}: ${Array.from({ length: 30 }, (_, i) => `lighthouse${c} keeper${i}`).join(", ")}.`,
          },
        ] as Array<{
          role: "user" | "assistant";
          content: string;
        }>,
    );
    // Per conversation, its last prompt's size; summed over later turns, what of it was cached.
    const previous = new Map<number, number>();
    let cached = 0;
    let held = 0;
    for (let turn = 0; turn < 3; turn++) {
      for (const [c, messages] of conversations.entries()) {
        const reply = await gateway.client.chat.completions.create({ model: "remote", max_tokens: 8, temperature: 0, messages });
        if (turn > 0) {
          cached += reply.usage!.prompt_tokens_details!.cached_tokens!;
          held += previous.get(c)!;
        }
        previous.set(c, reply.usage!.prompt_tokens);
        messages.push({ role: "assistant", content: reply.choices[0]!.message.content! }, { role: "user", content: `Go on (${turn}).` });
      }
    }
    // The worker that read a conversation's last prompt holds it (but its last token or two, where
    // the reply's text joins it): a turn sent to the other worker would find none of it there. The
    // random model's replies, read back as text, tokenize otherwise than it wrote them, so the cache
    // ends at the reply.
    expect(cached / held).toBeGreaterThan(0.9);
  });

  it("serves the upstream model through Ollama's API too, listed with a digest", async () => {
    const ollama = new Ollama({ host: gateway.url });
    expect((await ollama.list()).models.map((model) => model.name)).toEqual(expect.arrayContaining(["remote:latest", "local:latest"]));
    const reply = await ollama.chat({
      model: "remote",
      messages: [{ role: "user", content: "Tell me about the sea." }],
      options: { temperature: 0, num_predict: 12 },
    });
    const direct = await workers[0]!.client.chat.completions.create({ ...question("Tell me about the sea."), model: "tiny" });
    expect(reply.message.content).toBe(direct.choices[0]!.message.content);
  });

  it("cancels the upstream request when the client leaves, so the worker's slot frees at once", async () => {
    const controller = new AbortController();
    const stream = await gateway.client.chat.completions.create(
      { model: "remote", max_tokens: 100_000, temperature: 0.8, stream: true, messages: [{ role: "user", content: "Go on forever." }] },
      { signal: controller.signal },
    );
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) break;
    controller.abort();
    const active = async () => {
      let sum = 0;
      for (const worker of workers) {
        const health = (await (await fetch(`${worker.url}/health`)).json()) as { loaded: Array<{ active: number }> };
        sum += health.loaded.reduce((total, model) => total + model.active, 0);
      }
      return sum;
    };
    // Left to run, the stream would decode ~32,700 tokens: seconds on any machine.
    await expect.poll(active, { timeout: 2_000, interval: 50 }).toBe(0);
  });

  it("gives several choices, logprobs and legacy completions as the worker does", async () => {
    const sampled = { ...question("Tell me about the sea."), temperature: 0.9, seed: 7, n: 3 };
    const direct = await workers[0]!.client.chat.completions.create({ ...sampled, model: "tiny" });
    const through = await gateway.client.chat.completions.create(sampled);
    // Each choice its own request with the choice's seed, as the worker seeds its own choices.
    expect(through.choices.map((choice) => choice.message.content)).toEqual(direct.choices.map((choice) => choice.message.content));
    expect(new Set(through.choices.map((choice) => choice.message.content)).size).toBeGreaterThan(1);
    expect(through.usage!.completion_tokens).toBe(direct.usage!.completion_tokens);
    expect(through.usage!.prompt_tokens).toBe(direct.usage!.prompt_tokens);

    const scored = { ...question("Tell me about the sea."), logprobs: true, top_logprobs: 2 };
    const directScores = await workers[0]!.client.chat.completions.create({ ...scored, model: "tiny" });
    const throughScores = await gateway.client.chat.completions.create(scored);
    expect(throughScores.choices[0]!.logprobs).toEqual(directScores.choices[0]!.logprobs);

    const completion = { prompt: "Once upon a time", max_tokens: 8, temperature: 0 };
    const directText = await workers[0]!.client.completions.create({ ...completion, model: "tiny" });
    const throughText = await gateway.client.completions.create({ ...completion, model: "remote", echo: true });
    expect(throughText.choices[0]!.text).toBe(`Once upon a time${directText.choices[0]!.text}`);
    expect(throughText.usage).toEqual(directText.usage);
  });

  it("embeds, reranks and tokenizes on the workers", async () => {
    const input = ["The sea is wide.", "A lighthouse keeper."];
    const direct = await workers[0]!.client.embeddings.create({ model: "tiny", input });
    const through = await gateway.client.embeddings.create({ model: "remote", input });
    expect(through.data.map((item) => item.embedding)).toEqual(direct.data.map((item) => item.embedding));
    expect(through.usage).toEqual(direct.usage);
    const cut = await gateway.client.embeddings.create({ model: "remote", input, dimensions: 8 });
    expect(Math.hypot(...cut.data[0]!.embedding)).toBeCloseTo(1, 5);
    expect(cut.data[0]!.embedding).toHaveLength(8);

    const documents = ["The sea is wide.", "Bread rises in the oven.", "Waves break on the shore."];
    const rank = async (server: TestServer, model: string) =>
      (await (await postJson(`${server.url}/v1/rerank`, { model, query: "the ocean", documents })).json()) as unknown;
    expect(await rank(gateway, "ranker")).toEqual({ ...((await rank(workers[0]!, "ranker")) as object), model: "ranker" });

    const tokenize = async (server: TestServer, model: string) =>
      (await (await postJson(`${server.url}/tokenize`, { model, content: "hello <|im_end|> world", with_pieces: true })).json()) as {
        tokens: Array<{ id: number }>;
      };
    const tokens = await tokenize(gateway, "remote");
    expect(tokens).toEqual(await tokenize(workers[1]!, "tiny"));
    const text = await postJson(`${gateway.url}/detokenize`, { model: "remote", tokens: tokens.tokens.map((token) => token.id) });
    expect(await text.json()).toEqual({ content: "hello <|im_end|> world" });
  });

  it("refuses what a model's declaration does not say it serves, and passes on an upstream's refusal as a 400", async () => {
    const rerank = await postJson(`${gateway.url}/v1/rerank`, { model: "remote", query: "q", documents: ["d"] });
    expect(rerank.status).toBe(400);
    expect(await rerank.json()).toMatchObject({
      error: { message: expect.stringMatching(/declared to serve chat, embeddings, not rerank/) },
    });
    const ghost = await postJson(`${gateway.url}/v1/chat/completions`, { ...question("hi"), model: "ghost" });
    expect(ghost.status).toBe(400);
    const refusal = await ghost.json();
    expect(refusal).toMatchObject({
      error: { message: expect.stringMatching(/endpoint #1 serving `ghost` refused chat completions: .*no-such-model/) },
    });
    expect(JSON.stringify(refusal)).not.toContain(workers[0]!.url);
    // A model declared to read images is listed so, and its images go to the upstream (here a
    // worker whose model has no projector, which refuses them).
    const seer = (await gateway.client.models.list()).data.find((model) => model.id === "seer") as unknown as { capabilities: string[] };
    expect(seer.capabilities).toContain("vision");
    const png = "data:image/png;base64," + encodePng(4, 4, () => [200, 40, 40]).toString("base64");
    const image = await postJson(`${gateway.url}/v1/chat/completions`, {
      ...question("hi"),
      model: "seer",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is it?" },
            { type: "image_url", image_url: { url: png } },
          ],
        },
      ],
    });
    expect(image.status).toBe(400);
    expect(await image.json()).toMatchObject({ error: { message: expect.stringMatching(/refused chat completions: .*image/i) } });
    const text = await postJson(`${gateway.url}/v1/chat/completions`, {
      ...question("hi"),
      model: "remote",
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: png } }] }],
    });
    expect(text.status).toBe(400);
    // Refused here, by the gateway, for a model not declared to read images: not sent upstream.
    expect(await text.json()).toMatchObject({ error: { message: expect.stringMatching(/`remote` does not read images/) } });
  });

  it("keeps requests with one prompt_cache_key on one worker, whatever their prompts", async () => {
    const served = async () => {
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
      return workers.map((worker) =>
        Number(
          new RegExp(`^modelhost_upstream_requests_total\\{model="remote",endpoint="${worker.url}/v1",outcome="ok"\\} (\\d+)$`, "m").exec(
            metrics,
          )?.[1] ?? 0,
        ),
      );
    };
    const before = await served();
    for (let c = 0; c < 16; c++) {
      await gateway.client.chat.completions.create({ ...question(`Unrelated question ${c}.`), prompt_cache_key: "user-42" });
    }
    const after = await served();
    // All 16 on one of the two workers: 16 unrelated prompts without a key would all land on one of
    // two by chance once in 32,768.
    expect(after.map((count, i) => count - before[i]!).sort((a, b) => a - b)).toEqual([0, 16]);
  });

  it("takes a worker that answers 500s out of its pool by its health checks, and back once it recovers", async () => {
    // A proxy in front of worker 0 that can be made to fail.
    let failing = false;
    let served = 0;
    const proxy = createServer((request, response) => {
      if (failing) {
        response.writeHead(500, { "content-type": "application/json" }).end('{"error":{"message":"broken"}}');
        return;
      }
      if (request.url?.endsWith("/chat/completions")) served++;
      const target = new URL(request.url!, workers[0]!.url);
      const forward = httpRequest(target, { method: request.method, headers: request.headers }, (answer) => {
        response.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(response);
      });
      request.pipe(forward);
    });
    proxy.listen(0, "127.0.0.1");
    await once(proxy, "listening");
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/v1`;
    const file = path.join(dir, "flaky.json");
    await writeFile(
      file,
      JSON.stringify({ models: { flaky: { model: "tiny", endpoints: [{ url: proxyUrl }, { url: `${workers[0]!.url}/v1` }] } } }),
    );
    const checked = await startTestServer({ config: { upstreams: file, upstreamHealthInterval: 100 } });
    const up = async () => {
      const metrics = await (await fetch(`${checked.url}/metrics`)).text();
      return new RegExp(`^modelhost_upstream_endpoint_up\\{model="flaky",endpoint="${proxyUrl}"\\} (\\d)$`, "m").exec(metrics)?.[1];
    };
    const ask = (c: number) =>
      checked.client.chat.completions.create({ model: "flaky", max_tokens: 2, messages: [{ role: "user", content: `Question ${c}.` }] });
    try {
      failing = true;
      // Out by its health check, before any request has to find out.
      await expect.poll(up, { timeout: 5_000, interval: 50 }).toBe("0");
      for (let c = 0; c < 10; c++) expect((await ask(c)).choices).toHaveLength(1);
      failing = false;
      await expect.poll(up, { timeout: 5_000, interval: 50 }).toBe("1");
      // Back in its pool: the conversations that prefer it go to it again.
      served = 0;
      for (let c = 0; c < 10; c++) await ask(c);
      expect(served).toBeGreaterThan(0);
    } finally {
      await checked.close();
      proxy.close();
    }
  });

  it("refuses logprobs from an upstream that gives none, naming it, rather than leaving them out", async () => {
    const plain = createServer((_request, response) => {
      const chunks = [
        { choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: "stop" }] },
        { choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } },
      ];
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join("") + "data: [DONE]\n\n");
    });
    plain.listen(0, "127.0.0.1");
    await once(plain, "listening");
    const url = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/v1`;
    const file = path.join(dir, "plain.json");
    await writeFile(file, JSON.stringify({ models: { plain: { endpoints: [{ url }] } } }));
    const server = await startTestServer({ config: { upstreams: file } });
    try {
      const body = { model: "plain", max_tokens: 4, logprobs: true, messages: [{ role: "user", content: "Hi" }] };
      const refused = await postJson(`${server.url}/v1/chat/completions`, body);
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({
        // Named by its place in the pool: a client is not told the fleet's addresses.
        error: { param: "logprobs", message: "The upstream endpoint #1 serving `plain` gives no logprobs." },
      });
      const streamed = await postJson(`${server.url}/v1/chat/completions`, { ...body, stream: true });
      expect(await streamed.text()).toContain("gives no logprobs");
      const without = await server.client.chat.completions.create({
        model: "plain",
        max_tokens: 4,
        messages: [{ role: "user", content: "Hi" }],
      });
      expect(without.choices[0]!.message.content).toBe("Hi");
    } finally {
      await server.close();
      plain.close();
    }
  });

  it("refuses to start in front of an upstream that streams without usage", async () => {
    // An OpenAI-compatible server that leaves usage out of its streams (as some do unless asked in
    // their own way): its token counts would have to be guessed.
    const bare = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`,
      );
    });
    bare.listen(0, "127.0.0.1");
    await once(bare, "listening");
    const url = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/v1`;
    const file = path.join(dir, "bare.json");
    await writeFile(file, JSON.stringify({ models: { bare: { endpoints: [{ url }] } } }));
    try {
      await expect(startTestServer({ config: { upstreams: file } })).rejects.toThrow(
        new RegExp(`The upstream ${url} serving \`bare\` streams chat completions without usage`),
      );
    } finally {
      bare.close();
    }
  });

  it("routes around a worker that is gone before the first byte: no request fails; /metrics shows it", async () => {
    const scrape = async () => {
      const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
      return (series: string) => Number(new RegExp(`^${series.replace(/[{}]/g, "\\$&")} (\\S+)$`, "m").exec(metrics)?.[1] ?? 0);
    };
    const [up, down] = workers.map((worker) => `model="remote",endpoint="${worker.url}/v1"`);
    const series = {
      ok: `modelhost_upstream_requests_total{${up},outcome="ok"}`,
      failed: `modelhost_upstream_requests_total{${down},outcome="error"}`,
      hits: `modelhost_upstream_affinity_total{model="remote",result="hit"}`,
      misses: `modelhost_upstream_affinity_total{model="remote",result="miss"}`,
    };
    const before = await scrape();
    await workers[1]!.close();
    // 24 conversations: about half prefer the closed worker (the ring hangs on the workers' random
    // ports), and fewer than 3 of 24 do once in 30,000 runs.
    for (let c = 0; c < 24; c++) {
      const reply = await gateway.client.chat.completions.create(question(`Failover ${c}: a question.`));
      expect(reply.choices[0]!.finish_reason).toBe("length");
    }
    const after = await scrape();
    const delta = (name: keyof typeof series) => after(series[name]) - before(series[name]);
    expect(delta("ok")).toBe(24);
    // The closed worker's refused connections until 3 in a row took it out of the pool.
    expect(delta("failed")).toBe(3);
    expect(after(`modelhost_upstream_endpoint_up{${down}}`)).toBe(0);
    expect(after(`modelhost_upstream_endpoint_up{${up}}`)).toBe(1);
    expect(after(`modelhost_upstream_in_flight{${up}}`)).toBe(0);
    // Every attempt had a conversation key: each is a hit or a miss.
    expect(delta("hits") + delta("misses")).toBe(delta("ok") + delta("failed"));
  });
});
