// The /stream relay's framing, headers, end and errors, and the page's files, with the answer's
// pieces controlled by a scripted compatible service.
import { afterEach, describe, expect, it } from "vitest";
import { ingest } from "../src/ingest.js";
import { DEFAULT_QUESTION } from "../src/server.js";
import { dataEvent } from "../src/sse.js";
import { parseSse, startRelay } from "./support/relay.js";
import { axis, startScriptedService, type ScriptedReply, type ScriptedService } from "./support/scriptedService.js";
import { createTestApp, type TestApp } from "./support/testApp.js";

/** Every question and document is about the lighthouse here: retrieval always passes. */
const embedText = () => axis(0);

let service: ScriptedService;
let app: TestApp;
let relay: Awaited<ReturnType<typeof startRelay>>;

async function setUp(script: ScriptedReply[]): Promise<void> {
  service = await startScriptedService(script, embedText);
  app = createTestApp(service.baseURL);
  await ingest(app.writeDocs({ "keeper.md": "The keeper lit the lamp." }), {
    client: app.client,
    store: app.store,
    embeddingModel: "embed",
  });
  relay = await startRelay(app);
}

afterEach(async () => {
  await relay?.close();
  app?.close();
  await service?.close();
});

const PIECES = [
  "line one\nline two",
  "\r\n",
  "a\rb",
  "c\r\nd",
  "data: not a field",
  " leading space",
  "",
  "  two spaces\n",
  "[DONE]",
  "end.",
];

describe("GET /stream", () => {
  it("frames each piece as data: lines that a conforming parser rebuilds, and ends with [DONE]", async () => {
    await setUp([
      { kind: "text", pieces: ["unstreamed"] },
      { kind: "text", pieces: PIECES },
    ]);
    const response = await fetch(`${relay.url}/stream?question=${encodeURIComponent("Who lit the lamp?")}`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(response.headers.get("cache-control")).toBe("no-cache");
    expect(response.headers.get("x-accel-buffering")).toBe("no");
    const body = await response.text();

    // The exact bytes of a multi-line piece, and of a leading space (ours is the one after the colon).
    expect(body).toContain("\n\ndata: line one\ndata: line two\n\n");
    expect(body).toContain("\n\ndata:  leading space\n\n");

    const events = parseSse(body);
    expect(events[0]!.event).toBe("sources");
    expect(JSON.parse(events[0]!.data)).toMatchObject([
      { source: expect.stringMatching(/keeper\.md$/), similarity: 1, band: "very strong", used: true },
    ]);
    const texts = events.slice(1).map((event) => {
      expect(event.event).toBeUndefined();
      return event.data;
    });
    // LF and leading spaces exactly; CR and CRLF as LF; the empty piece not sent; a "[DONE]" piece split so it cannot end the stream.
    expect(texts).toEqual([
      "line one\nline two",
      "\n",
      "a\nb",
      "c\nd",
      "data: not a field",
      " leading space",
      "  two spaces\n",
      "[DO",
      "NE]",
      "end.",
      "[DONE]",
    ]);
    expect(texts.slice(0, -1).join("")).toBe(PIECES.join("").replace(/\r\n?/g, "\n"));
  });

  it("asks the default question when none is given", async () => {
    await setUp([
      { kind: "text", pieces: ["x"] },
      { kind: "text", pieces: ["y"] },
    ]);
    const events = parseSse(await (await fetch(`${relay.url}/stream`)).text());
    expect(events.map((event) => event.data).slice(1)).toEqual(["y", "[DONE]"]);
    const questions = service.requests.filter((r) => r.path === "/v1/embeddings").map((r) => r.body.input);
    expect(questions.at(-1)).toEqual([DEFAULT_QUESTION]);
    expect(service.chatRequests()[0]!.messages!.at(-1)).toEqual({ role: "user", content: DEFAULT_QUESTION });
  });

  it("sends a failure after the stream began as event: error with the message, then ends", async () => {
    await setUp([
      { kind: "text", pieces: ["x"] },
      { kind: "text_then_error", pieces: ["partial"] },
    ]);
    const events = parseSse(await (await fetch(`${relay.url}/stream?question=q`)).text());
    expect(events.map((event) => [event.event ?? "message", event.data])).toEqual([
      ["sources", expect.any(String)],
      ["message", "partial"],
      ["error", expect.stringContaining("the model crashed")],
    ]);
  });

  it("cancels the streamed request to the model at once when the client disconnects", async () => {
    await setUp([
      { kind: "text", pieces: ["x"] },
      { kind: "text_then_hang", pieces: ["The first piece"] },
    ]);
    const controller = new AbortController();
    const response = await fetch(`${relay.url}/stream?question=q`, { signal: controller.signal });
    const reader = response.body!.getReader();
    let received = "";
    while (!received.includes("data: The first piece\n\n")) received += new TextDecoder().decode((await reader.read()).value);
    expect(service.disconnects).toBe(0);
    controller.abort();
    await expect.poll(() => service.disconnects, { timeout: 2_000, interval: 10 }).toBe(1);
  });

  it("writes the same bytes for a piece as dataEvent", () => {
    expect(dataEvent("a\nb")).toBe("data: a\ndata: b\n\n");
    expect(dataEvent("\r\n")).toBe("data: \ndata: \n\n");
    expect(dataEvent("")).toBe("");
  });
});

describe("the page", () => {
  it("serves the page, its script and style from the app itself, and nothing else", async () => {
    await setUp([]);
    const page = await fetch(`${relay.url}/`);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const html = await page.text();
    expect(html).toContain('<script type="module" src="/app.js"></script>');
    expect(html).not.toMatch(/https?:\/\//); // no CDN
    expect((await fetch(`${relay.url}/app.js`)).headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect((await fetch(`${relay.url}/style.css`)).status).toBe(200);
    expect((await fetch(`${relay.url}/../package.json`)).status).toBe(404);
    expect((await fetch(`${relay.url}/index.html`)).status).toBe(404);
    expect((await fetch(`${relay.url}/stream`, { method: "POST" })).status).toBe(405);
  });
});
