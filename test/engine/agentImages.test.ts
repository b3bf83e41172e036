import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answer } from "../../examples/agent/src/agent.js";
import { ingest } from "../../examples/agent/src/ingest.js";
import { collector, createTestApp } from "../../examples/agent/test/support/testApp.js";
import { projectorWriter, TINY_PROJECTORS } from "../../src/testmodels/projectorWriter.js";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { encodePng } from "../support/images.js";
import { ensureNativeEngine } from "../support/nativeEngine.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 33: the sample agent (examples/agent) passes an image its view_image tool returns to a
 * chat model that reads images, in a user message after the tool results, and to no other model,
 * on the real server with the native engine (the prebuilt llama.cpp reads no images). The two chat
 * models are the same tiny file, `agent-vision` with a projector beside it, `agent-text` without.
 *
 * The model's first reply, the call of view_image, is played by the test (in the client's fetch):
 * tiny's random weights call no tool on purpose, and the scripted models that write a chosen reply
 * are script-tiny's, 128 wide, which the 64-wide tiny projector does not fit; such a model would
 * also call the tool again in every round, so the loop would never end. Every other request goes
 * to the server: the one that carries the image, and the streamed answer.
 */
const DOC = "The lighthouse keeper drew a chart of the tides every evening at dusk.";
/** 48 × 40: a blue field with a dark diagonal stripe pattern. */
const PNG = encodePng(48, 40, (x, y) => ((x + y) % 7 ? [30, 30, 230] : [0, 0, 0]));
/** Image tokens of the tiny mlp projector: (32 / 8)². */
const IMAGE_TOKENS = 16;

interface Sent {
  url: string;
  body?: OpenAI.ChatCompletionCreateParams;
  /** The server's count for a non-streamed chat request. */
  promptTokens?: number;
}

/**
 * A fetch for the app's client that records what it sends, and answers the first chat request of
 * each answer (no tool results yet) with a call of view_image, as a model would.
 */
function playedToolCall(imageName: string): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const played = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = input instanceof Request ? input.url : String(input);
    const body = typeof init?.body === "string" ? (JSON.parse(init.body) as OpenAI.ChatCompletionCreateParams) : undefined;
    const record: Sent = { url, ...(body ? { body } : {}) };
    sent.push(record);
    if (body && url.endsWith("/chat/completions") && !body.messages.some((message) => message.role === "tool")) {
      return Response.json({
        id: "chatcmpl-played",
        object: "chat.completion",
        created: 1_700_000_000,
        model: body.model,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: null,
              tool_calls: [
                { id: "call_played", type: "function", function: { name: "view_image", arguments: JSON.stringify({ name: imageName }) } },
              ],
            },
            finish_reason: "tool_calls",
            logprobs: null,
          },
        ],
      });
    }
    const response = await fetch(input, init);
    if (body && !body.stream && response.ok && url.endsWith("/chat/completions")) {
      record.promptTokens = ((await response.clone().json()) as OpenAI.ChatCompletion).usage?.prompt_tokens;
    }
    return response;
  };
  return { fetch: played, sent };
}

const chatRequests = (sent: Sent[]) => sent.filter((request) => request.url.endsWith("/chat/completions"));
const withParts = (messages: OpenAI.ChatCompletionMessageParam[]) =>
  messages.filter((message) => message.role === "user" && Array.isArray(message.content));

describe.skipIf(!needs(...engineBuildTools))("the sample agent's images, on a vision model (native engine)", () => {
  let dir: string;
  let server: TestServer;

  beforeAll(async () => {
    await ensureNativeEngine();
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-agent-images-"));
    const projector = path.join(dir, "mmproj-agent-vision-f16.gguf");
    await projectorWriter(TINY_PROJECTORS.mlp, 7).write(projector);
    const tiny = await testModelPath("tiny");
    server = await startTestServer({
      // The projector pairs with agent-vision by its name; agent-text is the same model without one.
      models: {
        "agent-vision": tiny,
        "mmproj-agent-vision-f16": projector,
        "agent-text": tiny,
        "embed-tiny": await testModelPath("embed-tiny"),
      },
      config: { engine: "native", threads: 2, contextSize: 4096 },
    });
  }, 40 * 60_000);
  afterAll(async () => {
    await server?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Ingests DOC and the image into a fresh app on `chatModel`, and answers DOC (retrieved at similarity 1). */
  async function ask(chatModel: string) {
    const recorder = playedToolCall("chart.png");
    const app = createTestApp(`${server.url}/v1`, { chatModel, embeddingModel: "embed-tiny", maxTokens: 8 }, { fetch: recorder.fetch });
    try {
      await ingest(app.writeDocs({ "lighthouse.md": DOC, "charts/chart.png": PNG }), {
        client: app.client,
        store: app.store,
        embeddingModel: "embed-tiny",
      });
      const { pieces, events } = collector();
      await answer(DOC, app, events);
      return { pieces, chats: chatRequests(recorder.sent), sent: recorder.sent };
    } finally {
      app.close();
    }
  }

  it("sends the image a tool returned to a model that reads images, after the tool results; the server counts its tokens", async () => {
    const { pieces, chats, sent } = await ask("agent-vision");
    const afterTools = chats[1]!;
    const messages = afterTools.body!.messages;
    expect(messages.slice(-3).map((message) => message.role)).toEqual(["assistant", "tool", "user"]);
    expect(JSON.parse(messages.at(-2)!.content as string)).toEqual({
      image: "charts/chart.png",
      media_type: "image/png",
      bytes: PNG.length,
    });
    const dataUrl = `data:image/png;base64,${PNG.toString("base64")}`;
    expect(messages.at(-1)!.content).toEqual([
      { type: "text", text: "The image returned by view_image:" },
      { type: "image_url", image_url: { url: dataUrl } },
    ]);
    // Server-side: the same messages without the image count at least its 16 tokens fewer.
    const withoutImage = messages.map((message) =>
      Array.isArray(message.content)
        ? { role: "user" as const, content: (message.content as OpenAI.ChatCompletionContentPart[]).filter((part) => part.type === "text") }
        : message,
    );
    const control = await server.client.chat.completions.create({
      model: "agent-vision",
      messages: withoutImage,
      tools: afterTools.body!.tools!,
      max_tokens: 1,
    });
    expect(afterTools.promptTokens! - control.usage!.prompt_tokens).toBeGreaterThanOrEqual(IMAGE_TOKENS);
    // The capabilities were asked once; the loop ended with the streamed answer, on the same messages.
    expect(sent.filter((request) => request.url.endsWith("/models/agent-vision"))).toHaveLength(1);
    expect(chats.at(-1)!.body).toMatchObject({ stream: true, tool_choice: "none" });
    expect(withParts(chats.at(-1)!.body!.messages)).toHaveLength(1);
    expect(pieces.join("").length).toBeGreaterThan(0);
  });

  it("sends no image to a model that does not read images, and the tool result says why", async () => {
    const listed = (await server.client.models.retrieve("agent-text")) as unknown as { capabilities: string[] };
    expect(listed.capabilities).not.toContain("vision");
    const { pieces, chats } = await ask("agent-text");
    for (const request of chats) expect(withParts(request.body!.messages)).toEqual([]);
    const messages = chats[1]!.body!.messages;
    expect(messages.at(-1)!.role).toBe("tool");
    expect(JSON.parse(messages.at(-1)!.content as string)).toEqual({
      image: "charts/chart.png",
      media_type: "image/png",
      bytes: PNG.length,
      image_not_shown:
        "The chat model (agent-text) does not read images, so the image was not shown to it: tell the user it cannot be seen here.",
    });
    expect(chats[1]!.promptTokens).toBeGreaterThan(0); // the server took the request
    expect(chats.at(-1)!.body).toMatchObject({ stream: true, tool_choice: "none" });
    expect(pieces.join("").length).toBeGreaterThan(0);
  });
});
