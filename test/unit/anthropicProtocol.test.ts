import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import { fromCountTokensRequest, fromMessagesRequest } from "../../src/protocols/anthropic/fromMessagesRequest.js";
import { toMessage } from "../../src/protocols/anthropic/toMessage.js";
import { MessageStream } from "../../src/protocols/anthropic/MessageStream.js";

const done = (extra: Partial<Extract<ChatEvent, { type: "done" }>> = {}): ChatEvent => ({
  type: "done",
  finishReason: "stop",
  usage: { promptTokens: 7, cachedTokens: 2, completionTokens: 5 },
  timings: { loadMs: 0, promptMs: 0, generationMs: 0 },
  ...extra,
});

async function* events(list: ChatEvent[]): AsyncGenerator<ChatEvent> {
  yield* list;
}

describe("Messages request translation", () => {
  it("turns system blocks, tool_use and tool_result blocks into the engine's conversation", () => {
    const { chat, stream } = fromMessagesRequest({
      model: "m",
      max_tokens: 9,
      system: [
        { type: "text", text: "One." },
        { type: "text", text: "Two." },
      ],
      stop_sequences: ["END"],
      temperature: 0.5,
      top_k: 3,
      tools: [{ name: "add", input_schema: { type: "object", properties: {} } }],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      thinking: { type: "disabled" },
      messages: [
        { role: "user", content: "Add." },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hm", signature: "" },
            { type: "text", text: "Sure." },
            { type: "tool_use", id: "toolu_1", name: "add", input: { a: 1 } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Go on." },
            { type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "2" }] },
          ],
        },
      ],
    });
    expect(stream).toBe(false);
    expect(chat.messages).toEqual([
      { role: "system", content: "One.\nTwo." },
      { role: "user", content: "Add." },
      // The thinking block sent back is the turn's thought, for templates that print past thoughts.
      { role: "assistant", content: "Sure.", reasoning: "hm", toolCalls: [{ id: "toolu_1", name: "add", arguments: '{"a":1}' }] },
      { role: "tool", toolCallId: "toolu_1", content: "2" },
      { role: "user", content: "Go on." },
    ]);
    expect(chat).toMatchObject({
      maxTokens: 9,
      stop: ["END"],
      toolChoice: { type: "required" },
      parallelToolCalls: false,
      thinking: false,
    });
    expect(chat.sampling).toMatchObject({ temperature: 0.5, topP: 1, topK: 3 });
  });

  it("maps tool_choice auto, none and tool, and leaves top_k to the server when absent", () => {
    const base = { model: "m", messages: [{ role: "user", content: "x" }], tools: [{ name: "f", input_schema: { type: "object" } }] };
    expect(fromCountTokensRequest(base).toolChoice).toEqual({ type: "auto" });
    expect(fromCountTokensRequest({ ...base, tool_choice: { type: "none" } }).toolChoice).toEqual({ type: "none" });
    expect(fromCountTokensRequest({ ...base, tool_choice: { type: "tool", name: "f" } }).toolChoice).toEqual({
      type: "function",
      name: "f",
    });
    expect(fromMessagesRequest({ ...base, max_tokens: 1 }).chat.sampling.topK).toBeUndefined();
  });

  it("merges consecutive turns of one role into one, as the API does, so roles alternate", () => {
    const { messages } = fromCountTokensRequest({
      model: "m",
      messages: [
        { role: "user", content: "One." },
        { role: "user", content: [{ type: "text", text: "Two." }] },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Calling." },
            { type: "tool_use", id: "toolu_1", name: "f", input: {} },
          ],
        },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_2", name: "f", input: { a: 1 } }] },
        // The results of one assistant turn, in two user messages: one turn answering both calls.
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "r1" }] },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "toolu_2", content: "r2" },
            { type: "text", text: "Go on." },
          ],
        },
        { role: "user", content: "And more." },
      ],
    });
    expect(messages).toEqual([
      { role: "user", content: "One.\nTwo." },
      {
        role: "assistant",
        content: "Calling.",
        toolCalls: [
          { id: "toolu_1", name: "f", arguments: "{}" },
          { id: "toolu_2", name: "f", arguments: '{"a":1}' },
        ],
      },
      { role: "tool", toolCallId: "toolu_1", content: "r1" },
      { role: "tool", toolCallId: "toolu_2", content: "r2" },
      { role: "user", content: "Go on.\nAnd more." },
    ]);
    // Errors still name the block where the body has it.
    expect(() =>
      fromCountTokensRequest({
        model: "m",
        messages: [
          { role: "user", content: "x" },
          {
            role: "user",
            content: [
              { type: "text", text: "y" },
              { type: "tool_use", id: "t", name: "f", input: {} },
            ],
          },
        ],
      }),
    ).toThrow(/messages\[1\]\.content\[1\].*'tool_use' blocks belong in assistant messages/);
  });

  it("reads a final assistant turn of text as a prefill the reply continues", () => {
    const user = { role: "user", content: "Weather?" };
    const { chat } = fromMessagesRequest({
      model: "m",
      max_tokens: 5,
      messages: [user, { role: "assistant", content: [{ type: "text", text: "It is" }] }],
    });
    expect(chat.messages.at(-1)).toEqual({ role: "assistant", content: "It is" });
    expect(chat.continueLastMessage).toBe(true);
    expect(fromCountTokensRequest({ model: "m", messages: [user, { role: "assistant", content: "It is" }] }).continueLastMessage).toBe(
      true,
    );
    // A conversation ending with the user, or with an assistant turn without text, is answered in a turn of its own.
    expect(fromCountTokensRequest({ model: "m", messages: [user] }).continueLastMessage).toBeUndefined();
    expect(
      fromCountTokensRequest({ model: "m", messages: [user, { role: "assistant", content: [{ type: "thinking", thinking: "hm" }] }] })
        .continueLastMessage,
    ).toBeUndefined();
  });

  it("refuses a tool_result in an assistant turn and a tool_use in a user turn, naming the block", () => {
    const turn = (role: string, block: object) => () => fromCountTokensRequest({ model: "m", messages: [{ role, content: [block] }] });
    expect(turn("assistant", { type: "tool_result", tool_use_id: "x" })).toThrow(
      /messages\[0\]\.content\[0\].*'tool_result' blocks belong in user messages/,
    );
    expect(turn("user", { type: "tool_use", id: "x", name: "f", input: {} })).toThrow(/'tool_use' blocks belong in assistant messages/);
    expect(turn("user", { type: "text" })).toThrow(/messages\[0\]\.content\[0\]\.text/);
  });
});

describe("Messages reply translation", () => {
  it("opens a block per run of thought, text and each tool call, in order, and closes each", () => {
    const translator = new MessageStream({ id: "msg_x", model: "m" }, 7);
    expect(translator.start().map((event) => event.type)).toEqual(["message_start", "ping"]);
    const out = [
      { type: "thinking", text: "a" },
      { type: "thinking", text: "b" },
      { type: "text", text: "c" },
      { type: "tool_call_start", index: 0, name: "f" },
      { type: "tool_call_arguments", index: 0, text: '{"x":' },
      { type: "tool_call_arguments", index: 0, text: "1}" },
      { type: "tool_call_start", index: 1, name: "g" },
      done({ finishReason: "tool_calls" }),
    ].flatMap((event) => translator.next(event as ChatEvent));
    expect(out.map((event) => [event.type, "index" in event ? event.index : "-"])).toEqual([
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_delta", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_delta", 2],
      ["content_block_delta", 2],
      ["content_block_stop", 2],
      ["content_block_start", 3],
      ["content_block_stop", 3],
      ["message_delta", "-"],
      ["message_stop", "-"],
    ]);
    expect(out[3]).toEqual({ type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: "" } });
    expect(out[8]).toMatchObject({
      content_block: { type: "tool_use", id: expect.stringMatching(/^toolu_[A-Za-z0-9]{24}$/), name: "f", input: {} },
    });
    expect(out.at(-2)).toMatchObject({
      delta: { stop_reason: "tool_use", stop_sequence: null },
      // 2 of the 7 prompt tokens came from the cache: input_tokens is the rest, as Anthropic counts.
      usage: { input_tokens: 5, cache_read_input_tokens: 2, output_tokens: 5 },
    });
  });

  it("gathers the same events into the whole message; a stop sequence is named", async () => {
    const message = await toMessage(
      { id: "msg_x", model: "m" },
      events([{ type: "text", text: "Hel" }, { type: "text", text: "lo" }, done({ stopSequence: "END" })]),
      7,
    );
    expect(message).toMatchObject({
      id: "msg_x",
      content: [{ type: "text", text: "Hello", citations: null }],
      stop_reason: "stop_sequence",
      stop_sequence: "END",
      usage: { input_tokens: 5, output_tokens: 5, cache_read_input_tokens: 2, output_tokens_details: null },
    });
    const cut = await toMessage(
      { id: "msg_y", model: "m" },
      events([
        { type: "tool_call_start", index: 0, name: "f" },
        { type: "tool_call_arguments", index: 0, text: '{"a": ' },
        done({ finishReason: "length" }),
      ]),
      7,
    );
    // A call cut off by max_tokens has no complete input.
    expect(cut).toMatchObject({
      stop_reason: "max_tokens",
      content: [{ type: "tool_use", id: expect.stringMatching(/^toolu_[A-Za-z0-9]{24}$/), input: {} }],
    });
    await expect(toMessage({ id: "msg_z", model: "m" }, events([{ type: "text", text: "x" }]), 1)).rejects.toMatchObject({
      code: "internal_error",
    });
  });
});
