// Issue 16, Lifecycle: graceful shutdown of a real `modelhost serve` process on SIGTERM/SIGINT.
// Stops accepting, /health not-ready at once, requests in flight finish within --shutdown-grace,
// then the rest are cut with an error in their protocol's shape; the usage ledger is flushed and
// the process exits 0; a second signal exits at once.
import { mkdtemp, rm, symlink } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ggufCorpus, writeCorpus } from "../support/ggufCorpus.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { parseResponse } from "../support/rawHttp.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

/** A response body read as it arrives: its text so far, and when it ends (or fails, a reset). */
function readBody(response: Response) {
  let text = "";
  const decoder = new TextDecoder();
  const ended = (async () => {
    try {
      for await (const chunk of response.body as AsyncIterable<Uint8Array>) text += decoder.decode(chunk, { stream: true });
      return "ended" as const;
    } catch {
      return "reset" as const;
    }
  })();
  return { text: () => text, ended };
}

const post = (url: string, body: object, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/**
 * As long as a generation can be: --context-size is capped at the tiny model's trained 4,096
 * tokens, so a reply ends after about 4,070 tokens (about 5 s for one stream, 20 s for four decoded
 * together, on a loaded 2-core machine), long after the 1 s grace periods below.
 */
const LONG = 100_000;
const chatBody = (extra: object) => ({ model: "tiny", messages: [{ role: "user", content: "Write a very long essay." }], ...extra });

describe("graceful shutdown of a server process", () => {
  let modelsDir: string;
  let server: ServerProcess | undefined;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-shutdown-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.destroy();
    await server?.kill();
    server = undefined;
  });
  afterAll(async () => {
    if (modelsDir) await rm(modelsDir, { recursive: true, force: true });
  });

  const start = async (args: string[]) => {
    server = await startServerProcess([
      "--models-dir",
      modelsDir,
      "--context-size",
      String(LONG + 1000),
      "--max-generation-time",
      "0",
      ...args,
    ]);
    return server;
  };
  /** Resolves once the server has reacted to the signal (it says so on stderr). */
  const draining = (running: ServerProcess) =>
    expect.poll(() => running.output(), { timeout: 10_000 }).toMatch(/finishing the requests in flight/);
  const activeRequests = async (running: ServerProcess) => {
    const health = (await (await fetch(`${running.url}/health`)).json()) as { loaded: { active: number }[] };
    return health.loaded.reduce((sum, model) => sum + model.active, 0);
  };

  it("stops accepting, says draining on /health, lets a stream in flight finish, and exits 0", async () => {
    const running = await start(["--shutdown-grace", "60s"]);
    // Clients in the middle of sending their requests when the signal comes: they get answers.
    const { hostname, port } = new URL(running.url);
    const openProbe = async (target: string) => {
      const socket = net.connect({ host: hostname, port: Number(port) });
      sockets.push(socket);
      const reply: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => reply.push(chunk));
      const closed = new Promise((resolve) => socket.once("close", resolve));
      await new Promise((resolve) => socket.once("connect", resolve));
      socket.write(`GET ${target} HTTP/1.1\r\nHost: localhost\r\n`);
      return { finish: async () => (socket.write("\r\n"), await closed, parseResponse(Buffer.concat(reply))) };
    };
    const healthProbe = await openProbe("/health");
    const modelsProbe = await openProbe("/v1/models");

    // Long enough (seconds for the tiny model) to be still running when the probes are answered.
    const response = await post(`${running.url}/v1/chat/completions`, chatBody({ stream: true, max_tokens: 5000 }));
    expect(response.status).toBe(200);
    const body = readBody(response);
    await expect.poll(() => body.text(), { timeout: 20_000 }).toContain("data: ");

    const beforeSignal = body.text();
    expect(beforeSignal).not.toContain('finish_reason":"');
    running.signal("SIGTERM");
    await draining(running);
    const [health, refused] = await Promise.all([healthProbe.finish(), modelsProbe.finish()]);
    expect(health.status).toBe(503);
    expect(JSON.parse(health.body)).toMatchObject({ status: "draining", ready: false });
    // Work that arrives now is refused, in the route's shape, and the connection closed.
    expect(refused.status).toBe(503);
    expect(refused.headers["connection"]).toBe("close");
    expect(refused.headers["retry-after"]).toBe("1");
    expect(JSON.parse(refused.body).error).toMatchObject({ code: "engine_unavailable", message: expect.stringMatching(/shutting down/) });
    // New connections are refused: a load balancer sends the next request elsewhere.
    await expect(fetch(`${running.url}/health`)).rejects.toThrow();

    expect(await body.ended).toBe("ended");
    expect(body.text().trimEnd().endsWith("data: [DONE]")).toBe(true);
    // It was in flight at the signal (the one request the drain counted, its end not yet sent) and
    // generated on after it, to its natural end: tokens and the final chunk came after the signal.
    const afterSignal = body.text().slice(beforeSignal.length);
    expect(afterSignal).toMatch(/"delta":\{"content":/);
    expect(afterSignal).toMatch(/"finish_reason":"length"/);
    expect(await running.exited).toBe(0);
    expect(running.output()).toMatch(/stopped \(1 in flight, 0 cut, drained in \d+ ms\)/);
    // Above vitest's 60 s default: a start (up to 60 s) and a generation of ~4,000 tokens under the 60 s grace.
  }, 180_000);

  it("after the grace period, cuts streams with an error event in their protocol's shape and answers the others 503", async () => {
    // One sequence for each of the five requests, so all of them are decoding at the signal.
    const running = await start(["--shutdown-grace", "1s", "--parallel", "5"]);
    const openai = await post(`${running.url}/v1/chat/completions`, chatBody({ stream: true, max_tokens: LONG }));
    const ollama = await post(`${running.url}/api/chat`, chatBody({ options: { num_predict: LONG } }));
    // store: false, so the process writes nothing to the data directory.
    const responses = await post(`${running.url}/v1/responses`, {
      model: "tiny",
      input: "Write a very long essay.",
      stream: true,
      store: false,
    });
    const anthropic = await post(`${running.url}/v1/messages`, chatBody({ stream: true, max_tokens: LONG }));
    const plainReply = post(`${running.url}/v1/chat/completions`, chatBody({ max_tokens: LONG }));
    const openaiBody = readBody(openai);
    const ollamaBody = readBody(ollama);
    const responsesBody = readBody(responses);
    const anthropicBody = readBody(anthropic);
    await expect.poll(() => activeRequests(running), { timeout: 20_000 }).toBe(5);

    running.signal("SIGTERM");
    expect(await openaiBody.ended).toBe("ended");
    const events = openaiBody
      .text()
      .split("\n\n")
      .filter((block) => block.startsWith("data: "));
    expect(events.at(-1)).not.toBe("data: [DONE]");
    const last = JSON.parse(events.at(-1)!.slice("data: ".length)) as { error: { code: string; type: string; message: string } };
    expect(last.error).toMatchObject({ code: "engine_unavailable", type: "server_error" });
    expect(last.error.message).toMatch(/shutting down/);

    expect(await ollamaBody.ended).toBe("ended");
    const lines = ollamaBody.text().trimEnd().split("\n");
    expect(JSON.parse(lines.at(-1)!)).toEqual({ error: expect.stringMatching(/shutting down/) });

    // The Responses API's typed stream ends with its own `error` event, numbered like the others.
    expect(await responsesBody.ended).toBe("ended");
    const typed = responsesBody
      .text()
      .split("\n\n")
      .filter((block) => block.startsWith("event: "));
    const [name, data] = typed.at(-1)!.split("\n");
    expect(name).toBe("event: error");
    expect(JSON.parse(data!.slice("data: ".length))).toEqual({
      type: "error",
      code: "engine_unavailable",
      message: expect.stringMatching(/shutting down/),
      param: null,
      sequence_number: typed.length - 1,
    });

    // The Messages API's named events end with its `error` event, after content it had streamed.
    expect(await anthropicBody.ended).toBe("ended");
    const named = anthropicBody
      .text()
      .split("\n\n")
      .filter((block) => block.startsWith("event: "));
    expect(named.some((block) => block.startsWith("event: content_block_delta\n"))).toBe(true);
    expect(named.some((block) => block.startsWith("event: message_stop\n"))).toBe(false);
    const [anthropicName, anthropicData] = named.at(-1)!.split("\n");
    expect(anthropicName).toBe("event: error");
    expect(JSON.parse(anthropicData!.slice("data: ".length))).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: expect.stringMatching(/shutting down/) },
    });

    const plain = await plainReply;
    expect(plain.status).toBe(503);
    expect(((await plain.json()) as { error: { code: string } }).error.code).toBe("engine_unavailable");

    expect(await running.exited).toBe(0);
    expect(running.output()).toMatch(/stopped \(5 in flight, 5 cut, drained in \d+ ms\)/);
    // Above vitest's 60 s default: a start (up to 60 s), 20 s until all decode, the grace and the cut.
  }, 120_000);

  it("exits at once on a second signal", async () => {
    const running = await start(["--shutdown-grace", "10m"]);
    const response = await post(`${running.url}/v1/chat/completions`, chatBody({ stream: true, max_tokens: LONG }));
    const body = readBody(response);
    await expect.poll(() => body.text()).toContain("data: ");
    running.signal("SIGTERM");
    await draining(running);
    running.signal("SIGINT");
    // 128 + SIGINT's number, as a shell reports a process ended by it; the stream just stops.
    expect(await running.exited).toBe(130);
    expect(await body.ended).toMatch(/ended|reset/);
    expect(body.text()).not.toContain("[DONE]");
    expect(running.output()).toMatch(/SIGINT again, exiting now/);
  });
});

// Issue 28, finding 4: a scan of malformed model files never holds up a shutdown.
describe("shutdown during a scan of malformed model files", () => {
  let modelsDir: string;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-shutdown-bad-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
  });
  afterEach(async () => {
    await server?.kill();
    server = undefined;
  });
  afterAll(async () => {
    if (modelsDir) await rm(modelsDir, { recursive: true, force: true });
  });

  it("exits 0 within the grace period on SIGTERM while /api/tags scans a folder of malformed files", async () => {
    server = await startServerProcess(["--models-dir", modelsDir, "--shutdown-grace", "1s"]);
    const running = server;
    // Added after the start, so the scan happens on the request below: 10 copies of the refused
    // corpus (640 files, among them a 70 MB sparse one and several of a few MB) take seconds.
    const refused = ggufCorpus().filter((entry) => entry.expected !== "accepted");
    for (let copy = 0; copy < 10; copy++) await writeCorpus(modelsDir, refused, `c${copy}-bad-`);
    const tags = fetch(`${running.url}/api/tags`).then(
      (response) => response.status,
      () => "reset",
    );
    await expect.poll(() => running.output(), { timeout: 10_000, interval: 5 }).toMatch(/Skipping .*\.gguf: not a readable GGUF model/);
    const signalled = performance.now();
    running.signal("SIGTERM");
    expect(await running.exited).toBe(0);
    const ms = performance.now() - signalled;
    console.log(`exited ${ms.toFixed(0)} ms after SIGTERM, in the middle of a scan`);
    // The grace period (1 s), and a margin for a loaded machine.
    expect(ms).toBeLessThan(3_000);
    expect([200, 503, "reset"]).toContain(await tags);
  });
});

describe("graceful shutdown in the hosted profile", () => {
  let hosted: Hosted;
  let modelsDir: string;
  let token: string;
  let server: ServerProcess | undefined;

  beforeAll(async () => {
    hosted = await openHosted();
    modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-shutdown-models-"));
    await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
    token = (await hosted.newAccount(undefined, { name: "drained" })).token;
  });
  afterAll(async () => {
    await server?.kill();
    await hosted?.close();
    if (modelsDir) await rm(modelsDir, { recursive: true, force: true });
  });

  /** A hosted server on this block's models and data, with the default tiers and `extra` flags. */
  const startHosted = (...extra: string[]) =>
    startServerProcess([
      "--profile",
      "hosted",
      "--models-dir",
      modelsDir,
      "--data-dir",
      hosted.dataDir,
      "--tiers-file",
      hosted.tiersFile,
      ...extra,
    ]);

  it("writes the usage of a request that finished while draining to the ledger before exiting", async () => {
    server = await startHosted("--shutdown-grace", "60s");
    const response = await post(
      `${server.url}/v1/chat/completions`,
      chatBody({ stream: true, max_tokens: 300, stream_options: { include_usage: true } }),
      { authorization: `Bearer ${token}` },
    );
    expect(response.status).toBe(200);
    const body = readBody(response);
    await expect.poll(() => body.text()).toContain("data: ");
    server.signal("SIGTERM");
    expect(await body.ended).toBe("ended");
    expect(await server.exited).toBe(0);

    const usageEvent = body
      .text()
      .split("\n\n")
      .filter((block) => block.startsWith("data: {"))
      .map((block) => JSON.parse(block.slice("data: ".length)) as { usage?: { prompt_tokens: number; completion_tokens: number } })
      .find((event) => event.usage);
    expect(usageEvent?.usage?.completion_tokens).toBeGreaterThan(0);

    const rows = await ledger();
    expect(rows).toEqual([
      expect.objectContaining({
        model: "tiny",
        requests: 1,
        promptTokens: usageEvent!.usage!.prompt_tokens,
        completionTokens: usageEvent!.usage!.completion_tokens,
      }),
    ]);
  });

  it("settles the usage of a stream cut at the end of the grace period before the ledger's last flush", async () => {
    const before = (await ledger()).reduce((sum, row) => sum + row.completionTokens, 0);
    server = await startHosted("--shutdown-grace", "1s", "--max-generation-time", "0", "--context-size", String(LONG + 1000));
    const response = await post(`${server.url}/v1/chat/completions`, chatBody({ stream: true, max_tokens: LONG }), {
      authorization: `Bearer ${token}`,
    });
    const body = readBody(response);
    await expect.poll(() => body.text()).toContain("data: ");
    server.signal("SIGTERM");
    expect(await body.ended).toBe("ended");
    expect(body.text()).toContain('"code":"engine_unavailable"');
    expect(await server.exited).toBe(0);
    // The cut request is in the ledger with what it generated (its prompt and every token sent).
    const chunks = body
      .text()
      .split("\n\n")
      .filter((block) => block.startsWith('data: {"id"')).length;
    const after = (await ledger()).reduce((sum, row) => sum + row.completionTokens, 0);
    expect(after - before).toBeGreaterThanOrEqual(chunks - 1);
  });

  const ledger = () => hosted.accounts.usage({ account: "drained" });
});
