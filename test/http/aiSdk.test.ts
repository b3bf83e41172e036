// Issue 29: the Vercel AI SDK against the real server, as an app uses it.
// - `@ai-sdk/openai`'s default model is the Responses API with `store` on: from the second turn it
//   replays earlier assistant turns as `item_reference` items, which the server resolves against
//   the caller's stored items. Three turns, streamed and not, on AI SDK 7 (@ai-sdk/openai 4) and on
//   AI SDK 6 (@ai-sdk/openai 3, installed under the aliases `ai-v6` and `ai-sdk-openai-v3`).
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, streamText, type ModelMessage } from "ai";
import { createOpenAI as createOpenAIv3 } from "ai-sdk-openai-v3";
import { generateText as generateTextV6, streamText as streamTextV6, type ModelMessage as ModelMessageV6 } from "ai-v6";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    models: { tiny: await testModelPath("tiny"), "think-tiny": await testModelPath("think-tiny") },
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
type Turn = (messages: unknown[], model: string, options: { fetch: typeof fetch; stream: boolean }) => Promise<{ text: string; messages: unknown[]; id: string }>;

const MAX_OUTPUT_TOKENS = 6;

const sdks: Array<{ name: string; turn: Turn }> = [
  {
    name: "AI SDK 7 with @ai-sdk/openai 4",
    async turn(messages, model, { fetch, stream }) {
      const openai = createOpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", fetch });
      const settings = { model: openai(model), messages: messages as ModelMessage[], maxOutputTokens: MAX_OUTPUT_TOKENS, maxRetries: 0 };
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
      const settings = { model: openai(model), messages: messages as ModelMessageV6[], maxOutputTokens: MAX_OUTPUT_TOKENS, maxRetries: 0 };
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
    const references = recorder.bodies.map((body) => (body.input as WireItem[]).filter((item) => item.type === "item_reference").map((item) => item.id));
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
    const referenced = (recorder.bodies[2]?.input as WireItem[]).filter((item) => item.type === "item_reference").map((item) => item.id?.slice(0, 3));
    expect(referenced).toContain("rs_");
  });
});
