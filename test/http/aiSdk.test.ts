// Issue 29: the Vercel AI SDK against the real server, as an app uses it.
// - `@ai-sdk/openai`'s default model is the Responses API with `store` on: from the second turn it
//   replays earlier assistant turns as `item_reference` items, which the server resolves against
//   the caller's stored items. Three turns, streamed and not, on AI SDK 7 (@ai-sdk/openai 4) and on
//   AI SDK 6 (@ai-sdk/openai 3, installed under the aliases `ai-v6` and `ai-sdk-openai-v3`).
// - `ollama-ai-provider-v2` validates Ollama's native replies strictly: `embedMany` (/api/embed,
//   which once left out `load_duration` when the model was already loaded) and `generateText`
//   (/api/chat).
import { createOpenAI } from "@ai-sdk/openai";
import { embedMany, generateText, streamText, type ModelMessage } from "ai";
import { createOpenAI as createOpenAIv3 } from "ai-sdk-openai-v3";
import { generateText as generateTextV6, streamText as streamTextV6, type ModelMessage as ModelMessageV6 } from "ai-v6";
import { createOllama } from "ollama-ai-provider-v2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    models: {
      tiny: await testModelPath("tiny"),
      "think-tiny": await testModelPath("think-tiny"),
      "embed-tiny": await testModelPath("embed-tiny"),
    },
    config: { contextSize: 2048 },
  });
});
afterAll(() => server?.close());

/** A fetch that remembers each JSON request body it sends (to see what the SDK put on the wire). */
function recordingFetch(): { fetch: typeof fetch; bodies: Array<Record<string, unknown>> } {
  const bodies: Array<Record<string, unknown>> = [];
  return {
    bodies,
    fetch: async (input, init) => {
      if (typeof init?.body === "string") bodies.push(JSON.parse(init.body) as Record<string, unknown>);
      return fetch(input, init);
    },
  };
}

/** One turn of a chat: the answer's text, the messages to append to the conversation, and the id of the stored response. */
type Turn = (
  messages: unknown[],
  model: string,
  options: { fetch: typeof fetch; stream: boolean },
) => Promise<{ text: string; messages: unknown[]; id: string }>;

const MAX_OUTPUT_TOKENS = 6;

const sdks: Array<{ name: string; turn: Turn }> = [
  {
    name: "AI SDK 7 with @ai-sdk/openai 4",
    async turn(messages, model, { fetch, stream }) {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", fetch });
      const settings = {
        model: openai(model),
        messages: messages as ModelMessage[],
        maxOutputTokens: MAX_OUTPUT_TOKENS,
        temperature: 0,
        maxRetries: 0,
      };
      if (!stream) {
        const result = await generateText(settings);
        return { text: result.text, messages: result.response.messages, id: result.response.id };
      }
      const result = streamText(settings);
      for await (const part of result.fullStream) if (part.type === "error") throw part.error;
      const response = await result.response;
      return { text: await result.text, messages: response.messages, id: response.id };
    },
  },
  {
    name: "AI SDK 6 with @ai-sdk/openai 3",
    async turn(messages, model, { fetch, stream }) {
      const openai = createOpenAIv3({ baseURL: `${server.url}/v1`, apiKey: "x", fetch });
      const settings = {
        model: openai(model),
        messages: messages as ModelMessageV6[],
        maxOutputTokens: MAX_OUTPUT_TOKENS,
        temperature: 0,
        maxRetries: 0,
      };
      if (!stream) {
        const result = await generateTextV6(settings);
        return { text: result.text, messages: result.response.messages, id: result.response.id };
      }
      const result = streamTextV6(settings);
      for await (const part of result.fullStream) if (part.type === "error") throw part.error;
      const response = await result.response;
      return { text: await result.text, messages: response.messages, id: response.id };
    },
  },
];

interface WireItem {
  type?: string;
  id?: string;
  role?: string;
}

describe.each(sdks)("$name, the default model (the Responses API, stored)", ({ turn }) => {
  it.each([false, true])("chats three turns, replaying earlier answers as item references (streamed: %s)", async (stream) => {
    const recorder = recordingFetch();
    const conversation: unknown[] = [];
    const answers: Array<{ text: string; id: string }> = [];
    for (const question of ["Hello.", "Tell me more.", "And then?"]) {
      conversation.push({ role: "user", content: question });
      const answer = await turn(conversation, "tiny", { fetch: recorder.fetch, stream });
      answers.push(answer);
      conversation.push(...answer.messages);
    }
    expect(recorder.bodies).toHaveLength(3);
    // Turns 2 and 3 name the earlier answers by id, as the SDK does with `store` on (the default).
    const references = recorder.bodies.map((body) =>
      (body.input as WireItem[]).filter((item) => item.type === "item_reference").map((item) => item.id),
    );
    expect(references[0]).toEqual([]);
    expect(references[1]).toHaveLength(1);
    expect(references[2]).toHaveLength(2);
    expect(references[2]?.[0]).toBe(references[1]?.[0]);
    expect(references[2]?.every((id) => id?.startsWith("msg_"))).toBe(true);

    // The third response's input is the whole conversation, the references replaced by the answers they name.
    const [first, second] = references[2] as string[];
    expect(answers[2]?.id).toMatch(/^resp_/);
    const items = (await server.client.responses.inputItems.list(answers[2]!.id, { order: "asc" })).data;
    expect(items.map((item) => [item.type, (item as WireItem).role])).toEqual([
      ["message", "user"],
      ["message", "assistant"],
      ["message", "user"],
      ["message", "assistant"],
      ["message", "user"],
    ]);
    expect(items[1]?.id).toBe(first);
    expect(items[3]?.id).toBe(second);
    const textOf = (item: unknown) => (item as { content: Array<{ text: string }> }).content.map((part) => part.text).join("");
    expect([textOf(items[1]), textOf(items[3])]).toEqual([answers[0]?.text, answers[1]?.text]);
  });

  it("references the reasoning items of a thinking model too", async () => {
    const recorder = recordingFetch();
    const conversation: unknown[] = [];
    for (const question of ["Hello.", "And then?", "Why?"]) {
      conversation.push({ role: "user", content: question });
      conversation.push(...(await turn(conversation, "think-tiny", { fetch: recorder.fetch, stream: false })).messages);
    }
    const referenced = (recorder.bodies[2]?.input as WireItem[])
      .filter((item) => item.type === "item_reference")
      .map((item) => item.id?.slice(0, 3));
    expect(referenced).toContain("rs_");
  });
});

describe("ollama-ai-provider-v2 against the native API", () => {
  /**
   * The provider sends `max_output_tokens` / `max_tokens`, which the native API does not read (nor
   * does Ollama's); the answers are kept short for the test's speed by adding `num_predict`.
   */
  const shortAnswers: typeof fetch = async (input, init) => {
    const body = typeof init?.body === "string" ? (JSON.parse(init.body) as Record<string, unknown>) : undefined;
    if (body && "model" in body && !("input" in body)) body.options = { ...(body.options as object), num_predict: MAX_OUTPUT_TOKENS };
    return fetch(input, body ? { ...init, body: JSON.stringify(body) } : init);
  };
  const ollama = () => createOllama({ baseURL: `${server.url}/api`, fetch: shortAnswers });

  it("embedMany validates /api/embed's reply, with the model loaded already or not", async () => {
    for (let round = 0; round < 2; round++) {
      const { embeddings, usage } = await embedMany({
        model: ollama().embedding("embed-tiny"),
        values: ["first text", "second text"],
        maxRetries: 0,
      });
      expect(embeddings).toHaveLength(2);
      expect(embeddings[0]!.length).toBeGreaterThan(0);
      expect(usage.tokens).toBeGreaterThan(0);
    }
  });

  it("generateText validates /api/chat's reply (the default model) and /api/generate's (the completion model)", async () => {
    for (const model of [ollama()("tiny"), ollama().completion("tiny")]) {
      for (let round = 0; round < 2; round++) {
        const result = await generateText({ model, prompt: "Hello.", maxRetries: 0 });
        expect(typeof result.text).toBe("string");
        expect(result.usage.outputTokens).toBeGreaterThan(0);
      }
    }
  });
});
