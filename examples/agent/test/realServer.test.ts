// The app against the real modelhost server, with generated models: `tiny` (chat, random
// weights: gibberish, but real generation) and `embed-tiny` (a BERT embedding model). A counting
// proxy in front of the server shows which requests the app made.
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../../../test/support/startTestServer.js";
import { testModelPath } from "../../../test/support/testModels.js";
import { answer, NO_INFORMATION } from "../src/agent.js";
import { ingest } from "../src/ingest.js";
import { parseSse, startRelay } from "./support/relay.js";
import { startCountingProxy, type CountingProxy } from "./support/countingProxy.js";
import { collector, createTestApp, type TestApp } from "./support/testApp.js";

const run = promisify(execFile);
const APP_DIR = path.resolve(import.meta.dirname, "..");
const DOC = "The lighthouse keeper lit the lamp every evening at dusk.";
const dot = (a: readonly number[], b: readonly number[]) => a.reduce((sum, value, i) => sum + value * b[i]!, 0);

let server: TestServer;
let proxy: CountingProxy;

beforeAll(async () => {
  server = await startTestServer({
    models: { tiny: await testModelPath("tiny"), "embed-tiny": await testModelPath("embed-tiny") },
    config: { contextSize: 4096 },
  });
  proxy = await startCountingProxy(server.url);
});
afterAll(async () => {
  await proxy?.close();
  await server?.close();
});

function testApp(maxTokens = 8): TestApp {
  return createTestApp(`${proxy.url}/v1`, { chatModel: "tiny", embeddingModel: "embed-tiny", maxTokens });
}

describe("ingest, against the real server", () => {
  it("embeds in batches, and on re-ingest skips unchanged files, replaces changed ones and removes deleted ones", async () => {
    const app = testApp();
    try {
      const options = { client: app.client, store: app.store, embeddingModel: "embed-tiny" };
      const longDoc = Array.from(
        { length: 12 },
        (_, i) => `Paragraph ${i} tells of keeper number ${i}. He kept the light burning all night.`,
      ).join("\n\n");
      const docs = app.writeDocs({
        "a.md": longDoc,
        "b.txt": "Bananas are rich in potassium.",
        "c.md": DOC,
        "notes/d.markdown": "A nested note.",
        "image.png": "not text",
      });
      const first = await ingest(docs, { ...options, chunking: { maxChars: 200, overlapChars: 80 } });
      expect(first.added.map((file) => path.relative(docs, file))).toEqual(["a.md", "b.txt", "c.md", "notes/d.markdown"]);
      // Images are not embedded; they are listed for view_image (which checks their bytes when asked).
      expect(first.images.map((file) => path.relative(docs, file))).toEqual(["image.png"]);
      expect(first.chunks).toBeGreaterThan(5); // a.md alone is cut into several overlapping chunks
      expect(first.requests).toBe(1); // one embeddings request for all of them (fewer than a batch)
      expect(app.store.chunkCount()).toBe(first.chunks);

      const embeddingsBefore = proxy.count("/v1/embeddings");
      const second = await ingest(docs, options);
      expect(second).toMatchObject({ added: [], changed: [], removed: [], chunks: 0, requests: 0 });
      expect(second.unchanged).toHaveLength(4);
      expect(proxy.count("/v1/embeddings")).toBe(embeddingsBefore);

      app.writeDocs({ "b.txt": "Bananas are yellow.\n\nThey grow in bunches.", "c.md": null });
      const third = await ingest(docs, options);
      expect(third.changed.map((file) => path.basename(file))).toEqual(["b.txt"]);
      expect(third.removed.map((file) => path.basename(file))).toEqual(["c.md"]);
      expect(third.requests).toBe(1);
      const texts = app.store.nearest(new Float32Array(64).fill(0.125), 100).map((chunk) => chunk.text);
      expect(texts).toContain("Bananas are yellow.\n\nThey grow in bunches.");
      expect(texts).not.toContain("Bananas are rich in potassium.");
      expect(texts).not.toContain(DOC);
      expect(app.store.chunkCount()).toBe(first.chunks - 2 + 1);
    } finally {
      app.close();
    }
  });
});

describe("answers, against the real server", () => {
  let app: TestApp;
  let docVector: number[];
  /** Questions measured just above and just below the default threshold of 0.75. */
  let justAbove: { text: string; similarity: number };
  let justBelow: { text: string; similarity: number };

  beforeAll(async () => {
    app = testApp();
    await ingest(app.writeDocs({ "lighthouse.md": DOC }), { client: app.client, store: app.store, embeddingModel: "embed-tiny" });
    // Measure first: candidate questions of varying closeness to the document, embedded in one request.
    const words = DOC.split(" ");
    const others = ["bananas", "quantum", "gluons", "potassium", "orbit", "violin", "granite", "tax"];
    const candidates = [
      ...words.map((_, i) => words.slice(0, i + 1).join(" ")),
      ...words.map((_, i) => words.slice(i).join(" ")),
      ...words.map((_, i) => words.filter((_, j) => j !== i).join(" ")),
      ...words.map((_, i) => words.slice(i, i + 3).join(" ")),
      ...others.flatMap((other, i) => [other, `${other} ${words.slice(0, i + 2).join(" ")}`, `${words.slice(-i - 2).join(" ")} ${other}`]),
    ];
    const { data } = await server.client.embeddings.create({ model: "embed-tiny", input: [DOC, ...candidates], encoding_format: "float" });
    docVector = data[0]!.embedding;
    const measured = candidates.map((text, i) => ({ text, similarity: dot(docVector, data[i + 1]!.embedding) }));
    justAbove = measured.filter((m) => m.similarity > 0.75 + 1e-4).sort((a, b) => a.similarity - b.similarity)[0]!;
    justBelow = measured.filter((m) => m.similarity < 0.75 - 1e-4).sort((a, b) => b.similarity - a.similarity)[0]!;
  });
  afterAll(() => app?.close());

  it("found questions within 0.03 of the threshold on both sides", () => {
    expect(justAbove.similarity).toBeLessThan(0.78);
    expect(justBelow.similarity).toBeGreaterThan(0.72);
  });

  it("answers from the documents: retrieval by cosine similarity, then the chat model (tool round unstreamed, answer streamed)", async () => {
    const before = proxy.count("/v1/chat/completions");
    const { pieces, sources, events } = collector();
    await answer(DOC, app, events);
    expect(sources[0]![0]).toMatchObject({
      source: expect.stringMatching(/lighthouse\.md$/),
      position: 0,
      band: "very strong",
      used: true,
    });
    expect(sources[0]![0]!.similarity).toBeCloseTo(1, 4);
    expect(proxy.count("/v1/chat/completions") - before).toBe(2);
    expect(pieces.join("").length).toBeGreaterThan(0);
  });

  it(`uses a chunk just above 0.75 and asks the chat model`, async () => {
    const before = proxy.count("/v1/chat/completions");
    const { sources, events } = collector();
    await answer(justAbove.text, app, events);
    // sqlite-vec's cosine distance agrees with the dot product of the unit vectors.
    expect(sources[0]![0]!.similarity).toBeCloseTo(justAbove.similarity, 4);
    expect(sources[0]![0]).toMatchObject({ used: true, band: "related" });
    expect(proxy.count("/v1/chat/completions")).toBeGreaterThan(before);
  });

  it("answers that there is no information just below 0.75, without calling the chat model", async () => {
    const chatBefore = proxy.count("/v1/chat/completions");
    const embeddingsBefore = proxy.count("/v1/embeddings");
    const { pieces, sources, events } = collector();
    await answer(justBelow.text, app, events);
    expect(sources[0]![0]!.similarity).toBeCloseTo(justBelow.similarity, 4);
    expect(sources[0]![0]).toMatchObject({ used: false, band: "related" });
    expect(pieces).toEqual([NO_INFORMATION]);
    expect(proxy.count("/v1/embeddings")).toBe(embeddingsBefore + 1);
    expect(proxy.count("/v1/chat/completions")).toBe(chatBefore);
  });

  it("stops generating when the client disconnects during the tool round (the server's /health shows no active request)", async () => {
    const longApp = createTestApp(`${proxy.url}/v1`, {
      chatModel: "tiny",
      embeddingModel: "embed-tiny",
      maxTokens: 3000,
      database: app.config.database,
    });
    const relay = await startRelay(longApp);
    const active = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: { id: string; active: number; queued: number }[] };
      return health.loaded.find((model) => model.id === "tiny")?.active ?? 0;
    };
    try {
      const controller = new AbortController();
      const response = await fetch(`${relay.url}/stream?question=${encodeURIComponent(DOC)}`, { signal: controller.signal });
      const reader = response.body!.getReader();
      const { value } = await reader.read(); // the sources event: the model is being asked now
      expect(parseSse(new TextDecoder().decode(value))[0]!.event).toBe("sources");
      await expect.poll(active, { timeout: 10_000 }).toBe(1);
      controller.abort();
      // 3000 tokens take tiny many seconds; the abort frees the slot in a few polls.
      await expect.poll(active, { timeout: 3_000, interval: 50 }).toBe(0);
    } finally {
      await relay.close();
      longApp.store.close();
    }
  });
});

describe("npm run agent (the CLI), against the real server", () => {
  it("ingests a folder and prints the streamed answer with its sources, never the key", async () => {
    const app = testApp();
    const key = "sk-test-0123456789-never-print-me";
    const env = {
      ...process.env,
      OPENAI_BASE_URL: `${proxy.url}/v1`,
      OPENAI_API_KEY: key,
      AGENT_CHAT_MODEL: "tiny",
      AGENT_EMBEDDING_MODEL: "embed-tiny",
      AGENT_DATABASE: app.config.database,
      AGENT_MAX_TOKENS: "8",
    };
    app.store.close();
    try {
      const docs = app.writeDocs({ "lighthouse.md": DOC });
      const cli = (...args: string[]) =>
        run(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], { cwd: APP_DIR, env, timeout: 120_000 });
      const ingested = await cli("ingest", docs);
      expect(ingested.stdout).toMatch(
        /1 added, 0 changed, 0 unchanged, 0 removed; 1 chunks embedded in 1 requests; 1 chunks stored; 0 images viewable/,
      );
      const asked = await cli("ask", DOC, "--debug");
      expect(asked.stdout).toMatch(/\n\nSources:\n\[1\] .*lighthouse\.md #0 {2}1\.000 very strong\n$/);
      expect(asked.stderr).toMatch(/\[debug\] .*lighthouse\.md #0 {2}1\.000 very strong/);
      for (const output of [ingested.stdout, ingested.stderr, asked.stdout, asked.stderr]) expect(output).not.toContain(key);
    } finally {
      fs.rmSync(app.dir, { recursive: true, force: true });
    }
  });
});
