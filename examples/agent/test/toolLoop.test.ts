// The tool loop and the no-information path, against a scripted compatible test double that
// checks what the app sends.
import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { encodeGif, encodePng } from "../../../test/support/images.js";
import { answer, NO_INFORMATION, RoundLimitError } from "../src/agent.js";
import { ingest, type IngestReport } from "../src/ingest.js";
import {
  axis,
  between,
  startScriptedService,
  type ChatMessage,
  type ScriptedReply,
  type ScriptedService,
} from "./support/scriptedService.js";
import { collector, createTestApp, type TestApp } from "./support/testApp.js";

/** The lighthouse document lies along axis 0; questions get the similarity their text names. */
function embedText(text: string): number[] {
  if (text.includes("lighthouse")) return axis(0);
  const similarity = /similarity (0\.\d+)/.exec(text)?.[1];
  return similarity ? between(0, 1, Number(similarity)) : axis(2);
}

const DOCS = { "lighthouse.md": "# Lighthouse\n\nThe lighthouse keeper lit the lamp at dusk." };

let service: ScriptedService;
let app: TestApp;

/** @param options.models model id → capabilities, for GET /v1/models/{id}; options.docs files besides DOCS */
async function setUp(
  script: ScriptedReply[],
  {
    maxRounds = 5,
    models = {},
    docs = {},
  }: { maxRounds?: number; models?: Record<string, string[] | "hang">; docs?: Record<string, Uint8Array> } = {},
): Promise<IngestReport> {
  service = await startScriptedService(script, embedText, models);
  app = createTestApp(service.baseURL, { maxRounds });
  return ingest(app.writeDocs({ ...DOCS, ...docs }), { client: app.client, store: app.store, embeddingModel: "embed" });
}

afterEach(async () => {
  app?.close();
  await service?.close();
});

/** Checks the conversation rules on every request the double received; returns the tool messages' parsed contents. */
function checkConversation(requests: { messages?: ChatMessage[] }[]): unknown[] {
  const last = requests.at(-1)!.messages!;
  const results: unknown[] = [];
  for (const [i, message] of last.entries()) {
    if (message.role !== "tool") continue;
    // The nearest assistant message before this run of tool messages made the call it answers.
    let j = i - 1;
    while (last[j]!.role === "tool") j--;
    const assistant = last[j]!;
    expect(assistant.role).toBe("assistant");
    expect(assistant.tool_calls!.map((call) => call.id)).toContain(message.tool_call_id);
    results.push(JSON.parse(message.content as string));
  }
  // One tool message per call, in the calls' order.
  for (const [j, message] of last.entries()) {
    if (message.role !== "assistant" || !message.tool_calls) continue;
    const answers = last.slice(j + 1, j + 1 + message.tool_calls.length);
    expect(answers.map((m) => [m.role, m.tool_call_id])).toEqual(message.tool_calls.map((call) => ["tool", call.id]));
  }
  return results;
}

describe("the tool loop, against a scripted service", () => {
  it("runs the tool phase unstreamed, then streams the final answer", async () => {
    await setUp([
      {
        kind: "tool_calls",
        calls: [
          { name: "calculate", arguments: '{"expression":"(17 + 25) * 2"}' },
          { name: "current_time", arguments: '{"time_zone":"Europe/Paris"}' },
        ],
      },
      { kind: "tool_calls", calls: [{ name: "search_documents", arguments: '{"query":"who lit the lighthouse lamp"}' }] },
      { kind: "text", pieces: ["(the unstreamed reply that ends the tool phase)"] },
      { kind: "text", pieces: ["The keeper", " lit it [1]; ", "84."] },
    ]);
    const { pieces, sources, events } = collector();
    await answer("Who lit the lighthouse lamp?", app, events);

    const chats = service.chatRequests();
    expect(chats.map((body) => Boolean(body.stream))).toEqual([false, false, false, true]);
    expect(chats.map((body) => body.tool_choice)).toEqual(["auto", "auto", "auto", "none"]);
    expect(pieces.join("")).toBe("The keeper lit it [1]; 84.");
    // The retrieved passage and its source went into the prompt.
    expect(chats[0]!.messages![0]!.content).toContain("[1] " + app.writeDocs({}) + "/lighthouse.md\n# Lighthouse");

    const results = checkConversation(chats);
    expect(results).toHaveLength(3);
    expect(results[0]).toEqual({ expression: "(17 + 25) * 2", result: 84 });
    expect(results[1]).toMatchObject({ time_zone: "Europe/Paris", utc: expect.stringMatching(/Z$/) });
    expect(results[2]).toMatchObject({ results: [{ source: expect.stringMatching(/lighthouse\.md$/), similarity: 1 }] });
    // Sources: the question's retrieval, then the model's own search.
    expect(sources).toHaveLength(2);
    expect(sources[0]![0]).toMatchObject({ used: true, band: "very strong", position: 0 });
  });

  it("reports a throwing tool, bad arguments and an unknown tool to the model as JSON errors", async () => {
    await setUp([
      {
        kind: "tool_calls",
        calls: [
          { name: "calculate", arguments: '{"expression":"2 +* 3"}' },
          { name: "current_time", arguments: '{"time_zone":"Mars/Olympus_Mons"}' },
          { name: "launch_rocket", arguments: "{}" },
          { name: "calculate", arguments: '{"expression":' },
        ],
      },
      { kind: "text", pieces: ["unused"] },
      { kind: "text", pieces: ["Sorry."] },
    ]);
    const { pieces, events } = collector();
    await answer("What is 2 +* 3 in the lighthouse?", app, events);
    const results = checkConversation(service.chatRequests()) as { error: string }[];
    expect(results.map((result) => Object.keys(result))).toEqual([["error"], ["error"], ["error"], ["error"]]);
    expect(results[0]!.error).toMatch(/unexpected "\*" at position 4/);
    expect(results[1]!.error).toMatch(/time zone/i);
    expect(results[2]!.error).toMatch(/unknown tool "launch_rocket"; available: search_documents, current_time, calculate, view_image$/);
    expect(results[3]!.error).toMatch(/arguments are not valid JSON/);
    expect(pieces.join("")).toBe("Sorry.");
  });

  it("stops after the round bound with a clear message, never streaming", async () => {
    const call: ScriptedReply = { kind: "tool_calls", calls: [{ name: "calculate", arguments: '{"expression":"1+1"}' }] };
    await setUp([call, call, call, call], { maxRounds: 2 });
    const { pieces, events } = collector();
    const error = await answer("Keep calling, lighthouse.", app, events).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RoundLimitError);
    expect((error as Error).message).toBe(
      "Stopped: the model still asked for tools after 2 rounds (AGENT_MAX_ROUNDS=2), so there is no answer.",
    );
    const chats = service.chatRequests();
    // Two tool rounds ran; the third reply still asked for tools and was not acted on.
    expect(chats.map((body) => Boolean(body.stream))).toEqual([false, false, false]);
    expect(checkConversation(chats)).toHaveLength(2);
    expect(pieces).toEqual([]);
  });

  it("answers that there is no information, without asking the chat model, when no chunk passes the threshold", async () => {
    await setUp([{ kind: "text", pieces: ["must not be asked"] }]);
    for (const question of ["bananas?", "similarity 0.7499", "similarity 0.2"]) {
      const { pieces, sources, events } = collector();
      await answer(question, app, events);
      expect(pieces).toEqual([NO_INFORMATION]);
      expect(sources[0]!.every((match) => !match.used)).toBe(true);
    }
    expect(service.chatRequests()).toEqual([]);
  });

  it("uses a chunk just above the threshold, and bands the score", async () => {
    await setUp([
      { kind: "text", pieces: ["unstreamed"] },
      { kind: "text", pieces: ["streamed"] },
    ]);
    const { sources, events } = collector();
    await answer("similarity 0.7501", app, events);
    expect(sources[0]![0]).toMatchObject({ used: true, band: "related" });
    expect(sources[0]![0]!.similarity).toBeCloseTo(0.7501, 5);
    expect(service.chatRequests()).toHaveLength(2);
  });
});

describe("images a tool returns, against a scripted service", () => {
  const PNG = encodePng(4, 3, (x, y) => [x * 60, y * 80, 200]);
  const GIF = encodeGif(2, 2, [0, 0, 255]);
  const dataUrl = `data:image/png;base64,${PNG.toString("base64")}`;
  const viewImage = (name: string) => ({ name: "view_image", arguments: JSON.stringify({ name }) });
  const QUESTION = "What does the lighthouse chart show?";
  /** The user messages that carry content parts (images) rather than a string. */
  const partMessages = (messages: ChatMessage[]) => messages.filter((message) => message.role === "user" && Array.isArray(message.content));

  it("shows view_image's image to a model that reads images, in a user message after the round's tool messages; the capabilities are asked once", async () => {
    const report = await setUp(
      [
        { kind: "tool_calls", calls: [viewImage("chart.png"), { name: "calculate", arguments: '{"expression":"6 * 7"}' }] },
        { kind: "text", pieces: ["unstreamed"] },
        { kind: "text", pieces: ["A red ", "bar."] },
        { kind: "tool_calls", calls: [viewImage("charts/chart.png"), viewImage("dot.gif")] },
        { kind: "text", pieces: ["unstreamed"] },
        { kind: "text", pieces: ["Again."] },
      ],
      { models: { chat: ["chat", "tools", "vision"] }, docs: { "charts/chart.png": PNG, "dot.gif": GIF } },
    );
    expect(report.images.map((file) => path.relative(app.writeDocs({}), file))).toEqual(["charts/chart.png", "dot.gif"]);
    const { pieces, events } = collector();
    await answer(QUESTION, app, events);
    expect(pieces.join("")).toBe("A red bar.");

    const chats = service.chatRequests();
    expect(chats.map((body) => Boolean(body.stream))).toEqual([false, false, true]);
    const sent = chats[1]!.messages!;
    // The assistant's calls, their two tool messages in order, then the image in a user message.
    expect(sent.slice(-4).map((message) => message.role)).toEqual(["assistant", "tool", "tool", "user"]);
    expect(sent.at(-1)!.content).toEqual([
      { type: "text", text: "The image returned by view_image:" },
      { type: "image_url", image_url: { url: dataUrl } },
    ]);
    expect(checkConversation(chats)).toEqual([
      { image: "charts/chart.png", media_type: "image/png", bytes: PNG.length },
      { expression: "6 * 7", result: 42 },
    ]);
    // The streamed answer is asked on the same messages, the image included.
    expect(partMessages(chats[2]!.messages!)).toHaveLength(1);

    // Two calls with images in one round: one user message, each image after its tool's line, in the calls' order.
    await answer(QUESTION, app, collector().events);
    expect(partMessages(service.chatRequests()[4]!.messages!)).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "The image returned by view_image:" },
          { type: "image_url", image_url: { url: dataUrl } },
          { type: "text", text: "The image returned by view_image:" },
          { type: "image_url", image_url: { url: `data:image/gif;base64,${GIF.toString("base64")}` } },
        ],
      },
    ]);
    expect(service.requests.filter((request) => request.path === "/v1/models/chat")).toHaveLength(1);
  });

  it.each([
    ["lists the model without vision", { chat: ["chat", "tools"] }],
    ["does not list the model (404)", {}],
  ])("sends no image, and says why in the tool's result, when the service %s", async (_, models) => {
    await setUp(
      [
        { kind: "tool_calls", calls: [viewImage("chart.png")] },
        { kind: "text", pieces: ["unstreamed"] },
        { kind: "text", pieces: ["I cannot see it."] },
      ],
      { models, docs: { "chart.png": PNG } },
    );
    const { pieces, events } = collector();
    await answer(QUESTION, app, events);
    expect(pieces.join("")).toBe("I cannot see it.");
    const chats = service.chatRequests();
    for (const body of chats) expect(partMessages(body.messages!)).toEqual([]);
    expect(checkConversation(chats)).toEqual([
      {
        image: "chart.png",
        media_type: "image/png",
        bytes: PNG.length,
        image_not_shown:
          "The chat model (chat) does not read images, so the image was not shown to it: tell the user it cannot be seen here.",
      },
    ]);
  });

  it("stops at once when the answer is cancelled while the model's capabilities are asked", async () => {
    await setUp([{ kind: "tool_calls", calls: [viewImage("chart.png")] }], { models: { chat: "hang" }, docs: { "chart.png": PNG } });
    const controller = new AbortController();
    const answered = answer(QUESTION, app, collector().events, controller.signal);
    await expect.poll(() => service.requests.some((request) => request.path === "/v1/models/chat")).toBe(true);
    controller.abort();
    await expect(answered).rejects.toThrow(/abort/i);
    await expect.poll(() => service.disconnects).toBe(1);
    expect(service.chatRequests()).toHaveLength(1);
  });

  it("reports an unknown, ambiguous, oversized or false image to the model, and never leaves the ingested folders", async () => {
    await setUp(
      [
        {
          kind: "tool_calls",
          calls: [
            viewImage("map.png"),
            viewImage("x.png"),
            viewImage("b/X.PNG"),
            viewImage("huge.png"),
            viewImage("fake.png"),
            viewImage("../outside.png"),
          ],
        },
        { kind: "text", pieces: ["unstreamed"] },
        { kind: "text", pieces: ["Done."] },
      ],
      {
        models: { chat: ["chat", "vision"] },
        docs: {
          "a/x.png": PNG,
          "b/x.png": PNG,
          "huge.png": Buffer.concat([PNG, Buffer.alloc(5 * 1024 * 1024)]),
          "fake.png": Buffer.from("not an image"),
          "notes.gif.txt": Buffer.from("a document, not an image"),
        },
      },
    );
    fs.writeFileSync(path.join(app.dir, "outside.png"), PNG); // beside the docs folder, not in it
    // A folder inside one ingested before: its image is still listed once, by its first name.
    await ingest(path.join(app.writeDocs({}), "a"), { client: app.client, store: app.store, embeddingModel: "embed" });
    await answer(QUESTION, app, collector().events);
    const chats = service.chatRequests();
    const results = checkConversation(chats) as { error?: string; image?: string }[];
    expect(results.map((result) => result.error ?? result.image)).toEqual([
      'There is no image named "map.png". The images are: a/x.png, b/x.png, fake.png, huge.png.',
      'Several images are named "x.png": a/x.png, b/x.png. Give one of these names.',
      "b/x.png", // by its name, whatever its case
      "huge.png is 5.0 MB; images of at most 4.0 MB can be shown.",
      "fake.png is not a PNG, JPEG, GIF, WebP or BMP image.",
      'There is no image named "../outside.png". The images are: a/x.png, b/x.png, fake.png, huge.png.',
    ]);
    // The one image shown, in one user message after the six tool messages.
    expect(partMessages(chats[1]!.messages!)).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "The image returned by view_image:" },
          { type: "image_url", image_url: { url: dataUrl } },
        ],
      },
    ]);
  });
});
