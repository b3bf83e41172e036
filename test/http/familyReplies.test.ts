import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatTemplate } from "../../src/chatTemplates/renderChatTemplate.js";
import { scriptTokens } from "../../src/testmodels/scriptTokens.js";
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";
import { familyModelName, familyTemplate, serveFamilies, type FamilyModel } from "../support/familyServer.js";
import { ANSWER_REPLIES, CALL_REPLIES, THOUGHT_REPLIES, type ReplyCase } from "../support/familyCases.js";
import { forcedWeatherTool } from "../support/toolSchemas.js";
import { postJson, readSseEvents, type TestServer } from "../support/startTestServer.js";

/**
 * Real families' replies, written by scripted weights (src/testmodels/scriptWiring.ts) after each
 * family's real template's generation prompt: a thought in the family's markers split from the
 * answer, and, in `auto` mode, a call the model opens in its family's syntax and the grammar
 * finishes, read back through each API.
 */
const vocabulary = testVocabulary();
const EOS = vocabulary.tokens[vocabulary.eosId]!;
const question = [{ role: "user", content: "What colour is the sky?" }];

const weather = forcedWeatherTool;

let server: TestServer;

/** The script for `reply` after the template's generation prompt: its last token, then the reply's. */
async function scriptFor(source: string, { reply, markers, stateMarkers = [] }: ReplyCase, thinking: boolean): Promise<string[]> {
  const prompt = new ChatTemplate(source).render({
    messages: question,
    addGenerationPrompt: true,
    // The thought cases' requests ask for thinking.
    ...(thinking ? { enableThinking: true, thinking: true } : {}),
    bosToken: vocabulary.tokens[vocabulary.bosId]!,
    eosToken: EOS,
  });
  const promptTokens = scriptTokens(prompt, markers);
  // A state marker in the prompt would be seen from the reply's first token (scriptWiring.ts).
  const inPrompt = stateMarkers.filter((marker) => promptTokens.includes(marker));
  if (inPrompt.length > 0) throw new Error(`The prompt contains the state markers ${inPrompt.join(", ")}; choose others.`);
  return [promptTokens.at(-1)!, ...scriptTokens(reply, markers)];
}

beforeAll(async () => {
  const models: Record<string, FamilyModel> = {};
  for (const [kind, cases] of Object.entries({ thought: THOUGHT_REPLIES, call: CALL_REPLIES, answer: ANSWER_REPLIES })) {
    for (const [family, testCase] of Object.entries(cases)) {
      const tokens = await scriptFor(await familyTemplate(testCase.template), testCase, kind === "thought");
      models[familyModelName(family, `${kind}-`)] = {
        template: testCase.template,
        preset: "script-tiny",
        script: { tokens, addedTokens: testCase.markers, stateMarkers: testCase.stateMarkers },
      };
    }
  }
  // Command R7B's preamble with a tool runs to about 4,000 tokens in the test vocabulary's bytes.
  server = await serveFamilies(models, { maxLoadedModels: 1, contextSize: 8192 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

describe.each(Object.keys(THOUGHT_REPLIES))("%s's thought", (family) => {
  const model = familyModelName(family, "thought-");

  it("is split from the answer in each API's field", async () => {
    // Thinking asked for in each API's way: llama.cpp's DeepSeek R1 template thinks only when told to.
    const chat = (await (
      await postJson(`${server.url}/v1/chat/completions`, { model, messages: question, temperature: 0, reasoning_effort: "high" })
    ).json()) as {
      choices: Array<{ message: { content: string; reasoning_content?: string } }>;
    };
    expect(chat.choices[0]!.message).toMatchObject({ reasoning_content: "The sky", content: "Blue." });
    const streamed = await streamedMessage({ model, messages: question, temperature: 0, reasoning_effort: "high" });
    expect(streamed).toEqual({ reasoning: "The sky", content: "Blue.", toolCalls: 0 });

    const ollama = (await (
      await postJson(`${server.url}/api/chat`, { model, messages: question, stream: false, think: true, options: { temperature: 0 } })
    ).json()) as { message: { content: string; thinking?: string } };
    expect(ollama.message).toMatchObject({ thinking: "The sky", content: "Blue." });

    const anthropic = (await (
      await postJson(`${server.url}/v1/messages`, {
        model,
        max_tokens: 64,
        messages: question,
        temperature: 0,
        thinking: { type: "enabled", budget_tokens: 1024 },
      })
    ).json()) as { content: Array<{ type: string; thinking?: string; text?: string }> };
    expect(anthropic.content).toEqual([
      expect.objectContaining({ type: "thinking", thinking: "The sky" }),
      expect.objectContaining({ type: "text", text: "Blue." }),
    ]);

    const responses = (await (
      await postJson(`${server.url}/v1/responses`, { model, input: question, temperature: 0, reasoning: { effort: "high" } })
    ).json()) as {
      output: Array<{ type: string; content?: Array<{ text: string }> }>;
    };
    expect(responses.output.map((item) => [item.type, item.content?.[0]?.text])).toEqual([
      ["reasoning", "The sky"],
      ["message", "Blue."],
    ]);
  });
});

describe.each(Object.keys(ANSWER_REPLIES))("%s's answer", (family) => {
  const model = familyModelName(family, "answer-");

  it("is given out without the family's framing, streamed and not, with and without tools", async () => {
    for (const tools of [undefined, [{ type: "function", function: weather }]]) {
      const body = { model, messages: question, temperature: 0, ...(tools ? { tools } : {}) };
      const chat = (await (await postJson(`${server.url}/v1/chat/completions`, body)).json()) as {
        choices: Array<{ finish_reason: string; message: { content: string; tool_calls?: unknown[] } }>;
      };
      expect(chat.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "Blue." } });
      expect(chat.choices[0]!.message.tool_calls).toBeUndefined();
      expect(await streamedMessage(body)).toEqual({ reasoning: "", content: "Blue.", toolCalls: 0 });
    }
    const ollama = (await (
      await postJson(`${server.url}/api/chat`, { model, messages: question, stream: false, options: { temperature: 0 } })
    ).json()) as { message: { content: string } };
    expect(ollama.message.content).toBe("Blue.");
  });
});

/** A streamed chat completion's message: its reasoning and content deltas joined, and how many call deltas it had. */
async function streamedMessage(body: Record<string, unknown>): Promise<{ reasoning: string; content: string; toolCalls: number }> {
  const response = await postJson(`${server.url}/v1/chat/completions`, { ...body, stream: true });
  const deltas = (await readSseEvents(response))
    .filter((data) => data !== "[DONE]")
    .flatMap(
      (data) =>
        (JSON.parse(data) as { choices: Array<{ delta: { content?: string; reasoning_content?: string; tool_calls?: unknown[] } }> })
          .choices,
    )
    .map((choice) => choice.delta);
  return {
    reasoning: deltas.map((delta) => delta.reasoning_content ?? "").join(""),
    content: deltas.map((delta) => delta.content ?? "").join(""),
    toolCalls: deltas.filter((delta) => delta.tool_calls).length,
  };
}

/**
 * Families whose templates turn thinking off in the generation prompt itself (an empty or closed
 * thought, Qwen's `<think>\n\n</think>\n\n`, Gemma 4's empty channel, Seed-OSS's at thinking_budget
 * 0): told not to think, the prompt ends otherwise than the script's source, so the weights write
 * none of it. Granite's, Magistral's and Apertus's switches change only their system text, where
 * what follows is the weights' choice, not the template's; MiniMax-M2's, Nemotron v2's, LFM2's and
 * Kimi K2 Thinking's have none a request reaches.
 */
const SWITCHED_OFF = ["Qwen3", "DeepSeek R1", "Command R7B", "DeepSeek V3.1", "GLM 4.5", "Qwen3.5", "Gemma 4", "Seed-OSS"];

describe.each(SWITCHED_OFF)("%s's thought turned off", (family) => {
  const model = familyModelName(family, "thought-");

  it("writes no thought markup and reports no reasoning", async () => {
    const { markers } = THOUGHT_REPLIES[family]!;
    const chat = (await (
      await postJson(`${server.url}/v1/chat/completions`, {
        model,
        messages: question,
        temperature: 0,
        max_tokens: 8,
        reasoning_effort: "none",
      })
    ).json()) as { choices: Array<{ message: { content: string; reasoning_content?: string } }> };
    expect(chat.choices[0]!.message.reasoning_content ?? "").toBe("");
    for (const marker of markers) expect(chat.choices[0]!.message.content).not.toContain(marker);

    const ollama = (await (
      await postJson(`${server.url}/api/chat`, {
        model,
        messages: question,
        stream: false,
        think: false,
        options: { temperature: 0, num_predict: 8 },
      })
    ).json()) as { message: { content: string; thinking?: string } };
    expect(ollama.message.thinking ?? "").toBe("");
    expect(ollama.message.content).toBe(chat.choices[0]!.message.content);
  });
});

describe.each(Object.keys(CALL_REPLIES))("%s's call in auto mode", (family) => {
  const model = familyModelName(family, "call-");

  it("is opened by the model, finished under the grammar and read back in each API", async () => {
    const tools = [{ type: "function", function: weather }];
    const chat = (await (
      await postJson(`${server.url}/v1/chat/completions`, {
        model,
        messages: question,
        tools,
        temperature: 0,
        max_tokens: 256,
        parallel_tool_calls: false,
      })
    ).json()) as {
      choices: Array<{
        finish_reason: string;
        message: { reasoning_content?: string; tool_calls?: Array<{ function: { name: string; arguments: string } }> };
      }>;
    };
    expect(chat.choices[0]!.finish_reason).toBe("tool_calls");
    // A reply that thinks before its call (Qwen3, and Nemotron v2 and MiniMax-M2, whose prompts open the thought).
    const { reply } = CALL_REPLIES[family]!;
    if (reply.includes("</think>")) {
      expect(chat.choices[0]!.message.reasoning_content).toBe(reply.split("</think>")[0]!.replace("<think>", "").trim());
    }
    const [call] = chat.choices[0]!.message.tool_calls!;
    expect(call!.function.name).toBe("get_weather");
    expect(JSON.parse(call!.function.arguments)).toEqual({ city: "Paris" });

    // Streamed: the same call, its arguments in pieces.
    const streamed = await postJson(`${server.url}/v1/chat/completions`, {
      model,
      messages: question,
      tools,
      temperature: 0,
      max_tokens: 256,
      parallel_tool_calls: false,
      stream: true,
    });
    const deltas = (await readSseEvents(streamed))
      .filter((data) => data !== "[DONE]")
      .flatMap(
        (data) =>
          (JSON.parse(data) as { choices: Array<{ delta: { tool_calls?: Array<{ function?: { arguments?: string } }> } }> }).choices,
      )
      .flatMap((choice) => choice.delta.tool_calls ?? []);
    expect(deltas.map((delta) => delta.function?.arguments ?? "").join("")).toBe(call!.function.arguments);

    const ollama = (await (
      await postJson(`${server.url}/api/chat`, {
        model,
        messages: question,
        tools,
        stream: false,
        options: { temperature: 0, num_predict: 256 },
      })
    ).json()) as { message: { tool_calls?: Array<{ function: { name: string; arguments: unknown } }> } };
    // Ollama's native API has no switch for parallel calls: with random weights after the script a
    // second call may follow; the first is the model's.
    expect(ollama.message.tool_calls?.[0]?.function).toMatchObject({ name: "get_weather", arguments: { city: "Paris" } });

    const anthropic = (await (
      await postJson(`${server.url}/v1/messages`, {
        model,
        max_tokens: 256,
        messages: question,
        temperature: 0,
        tools: [{ name: weather.name, description: weather.description, input_schema: weather.parameters }],
        tool_choice: { type: "auto", disable_parallel_tool_use: true },
      })
    ).json()) as { stop_reason: string; content: Array<{ type: string; name?: string; input?: unknown }> };
    expect(anthropic.stop_reason).toBe("tool_use");
    expect(anthropic.content.find((block) => block.type === "tool_use")).toMatchObject({ name: "get_weather", input: { city: "Paris" } });

    const responses = (await (
      await postJson(`${server.url}/v1/responses`, {
        model,
        input: question,
        temperature: 0,
        max_output_tokens: 256,
        tools: [{ type: "function", ...weather }],
        parallel_tool_calls: false,
      })
    ).json()) as { output: Array<{ type: string; name?: string; arguments?: string }> };
    const item = responses.output.find((each) => each.type === "function_call");
    expect(item?.name).toBe("get_weather");
    expect(JSON.parse(item!.arguments!)).toEqual({ city: "Paris" });
  });
});
