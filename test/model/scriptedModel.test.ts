import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/testmodels/makeTestModel.js";
import { TEST_MODEL_THINKING_CHAT_TEMPLATE } from "../../src/testmodels/testChatTemplate.js";
import { scriptText, scriptTokens } from "../../src/testmodels/scriptTokens.js";
import { withScriptTokens, type TestModelScript } from "../../src/testmodels/scriptWiring.js";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";

// Scripted test models (src/testmodels/scriptWiring.ts) through the real engine and server: under
// greedy decoding the reply is the script, whatever the prompt before the script's source token
// (a newline, as ChatML's generation prompt ends).

const HARMONY_MARKERS = ["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>", "<|call|>"];
const scripts = {
  // Tokens come back with other successors: <|channel|>, <|message|>, "." and "<|end|>"'s neighbours.
  harmony: {
    tokens: scriptTokens("\n<|channel|>analysis<|message|>Sky.<|end|><|start|>assistant<|channel|>final<|message|>Blue.", HARMONY_MARKERS),
    // With <|return|> and <|call|> in the vocabulary llama.cpp keeps <|end|> out of the end-of-generation tokens, as for gpt-oss.
    addedTokens: HARMONY_MARKERS,
  },
  // The pair (Ċ, <|channel|>) comes back with another successor: `an` (analysis), then `f` (final).
  // The thought's `The`, a state marker neither test prompt has, tells which.
  channels: {
    tokens: scriptTokens("\n<|channel|>analysis<|message|>The sky<|end|>\n<|channel|>final<|message|>Blue.", HARMONY_MARKERS),
    addedTokens: HARMONY_MARKERS,
    stateMarkers: ["The"],
  },
  // Ends the turn: the reply stops after the script.
  think: { tokens: scriptTokens("\n<think>The sky</think>Blue.<|im_end|>", ["<think>", "</think>"]) },
} satisfies Record<string, TestModelScript>;

const CHATML_PROMPT = "<|im_start|>user\nWhat colour is the sky?<|im_end|>\n<|im_start|>assistant\n";

interface CompletionBody {
  choices: Array<{ text: string; finish_reason: string }>;
}

describe("scripted test models", () => {
  let server: TestServer;
  let directory: string;

  beforeAll(async () => {
    directory = await mkdtemp(path.join(os.tmpdir(), "modelhost-scripted-"));
    const models: Record<string, string> = {};
    for (const [name, script] of Object.entries(scripts)) {
      // The thinking one with the Qwen3-style template of think-tiny, so its replies' thoughts are parsed.
      const chatTemplate = name === "think" ? TEST_MODEL_THINKING_CHAT_TEMPLATE : undefined;
      models[name] = (await makeTestModel({ preset: "script-tiny", out: path.join(directory, `${name}.gguf`), script, chatTemplate })).path;
    }
    server = await startTestServer({ models });
  });
  afterAll(async () => {
    await server?.close();
    await rm(directory, { recursive: true, force: true });
  });

  async function complete(model: keyof typeof scripts, prompt: string, maxTokens: number) {
    const response = await postJson(`${server.url}/v1/completions`, { model, prompt, max_tokens: maxTokens, temperature: 0 });
    expect(response.status).toBe(200);
    return ((await response.json()) as CompletionBody).choices[0]!;
  }

  it("tokenizes scripts as llama.cpp does (scriptTokens)", async () => {
    const { tokens, addedTokens } = scripts.harmony;
    const vocabulary = withScriptTokens(testVocabulary(), { tokens, addedTokens });
    const response = await postJson(`${server.url}/tokenize`, { model: "harmony", content: scriptText(tokens) });
    expect(((await response.json()) as { tokens: number[] }).tokens).toEqual(tokens.map((token) => vocabulary.tokens.indexOf(token)));
  });

  it.each(["harmony", "channels"] as const)(
    "writes the %s script exactly, tokens repeated with other successors included, then free text",
    async (model) => {
      const { tokens } = scripts[model];
      const written = tokens.length - 1;
      for (const prompt of [CHATML_PROMPT, "Once upon a time, by the river, the people said:\n"]) {
        expect(await complete(model, prompt, written)).toEqual({
          text: scriptText(tokens.slice(1)),
          finish_reason: "length",
          index: 0,
          logprobs: null,
        });
        const longer = await complete(model, prompt, written + 8);
        expect(longer.text.startsWith(scriptText(tokens.slice(1)))).toBe(true);
        expect(longer.text.length).toBeGreaterThan(scriptText(tokens.slice(1)).length);
      }
    },
  );

  it("ends the reply where the script ends with the end-of-turn token", async () => {
    const { tokens } = scripts.think;
    expect(await complete("think", CHATML_PROMPT, 64)).toMatchObject({ text: scriptText(tokens.slice(1, -1)), finish_reason: "stop" });
  });

  it("writes it as the reply to a chat through a thinking template whose generation prompt ends with the source token: thought and answer parsed", async () => {
    const response = await postJson(`${server.url}/v1/chat/completions`, {
      model: "think",
      messages: [{ role: "user", content: "What colour is the sky?" }],
      temperature: 0,
      max_tokens: 64,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: Array<{ message: Record<string, unknown>; finish_reason: string }> };
    expect(body.choices[0]).toMatchObject({ message: { content: "Blue.", reasoning_content: "The sky" }, finish_reason: "stop" });
  });
});
