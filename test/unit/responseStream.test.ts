// The Responses API's event translator on its own: engine events in, typed stream events and the
// response object out, for sequences the test models do not produce on demand (text, then two
// calls, then text again).
import { describe, expect, it } from "vitest";
import type { ChatEvent } from "../../src/core/ChatEvent.js";
import { fromResponseRequest } from "../../src/protocols/responses/fromResponseRequest.js";
import { ResponseStream } from "../../src/protocols/responses/ResponseStream.js";

const timings = { loadMs: 0, promptMs: 0, generationMs: 0 };
const usage = { promptTokens: 10, cachedTokens: 4, completionTokens: 7, reasoningTokens: 2 };

function run(events: ChatEvent[]) {
  const { settings } = fromResponseRequest({ model: "m", input: "hi" });
  const stream = new ResponseStream(settings, "resp_test", 1_700_000_000);
  const wire = [...stream.start(), ...events.flatMap((event) => stream.next(event))];
  return { types: wire.map((event) => event.type), wire, response: stream.response };
}

describe("ResponseStream", () => {
  it("gives each piece of output its own item, in order, closing one before opening the next", () => {
    const { types, wire, response } = run([
      { type: "thinking", text: "Hm." },
      { type: "text", text: "Let me " },
      { type: "text", text: "check." },
      { type: "tool_call_start", index: 0, name: "f" },
      { type: "tool_call_arguments", index: 0, text: '{"x":' },
      { type: "tool_call_arguments", index: 0, text: "1}" },
      { type: "tool_call_start", index: 1, name: "g" },
      { type: "tool_call_arguments", index: 1, text: "{}" },
      { type: "text", text: "Done." },
      { type: "done", finishReason: "tool_calls", usage, timings },
    ]);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      ...[
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
      ],
      ...[
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
      ],
      ...[
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
      ],
      ...[
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
      ],
      ...[
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
      ],
      "response.completed",
    ]);
    // Every added item's output_index is the length of the output before it, as the SDK checks.
    const added = wire.filter((event) => event.type === "response.output_item.added");
    expect(added.map((event) => ("output_index" in event ? event.output_index : -1))).toEqual([0, 1, 2, 3, 4]);
    expect(response.output.map((item) => item.type)).toEqual(["reasoning", "message", "function_call", "function_call", "message"]);
    expect(response.output[2]).toMatchObject({
      type: "function_call",
      call_id: expect.stringMatching(/^call_[A-Za-z0-9]{24}$/),
      name: "f",
      arguments: '{"x":1}',
      status: "completed",
    });
    expect(response.output_text).toBe("Let me check.Done.");
    expect(response.status).toBe("completed");
    expect(response.usage).toEqual({
      input_tokens: 10,
      input_tokens_details: { cached_tokens: 4, cache_write_tokens: 0 },
      output_tokens: 7,
      output_tokens_details: { reasoning_tokens: 2 },
      total_tokens: 17,
    });
    // The first events carry the response as it was then, not as it ended.
    expect(wire[0]).toMatchObject({ response: { status: "in_progress", output: [], usage: null } });
  });

  it("marks the response and its open item incomplete when the output cap is hit", () => {
    const { types, response } = run([
      { type: "text", text: "Once upon" },
      { type: "done", finishReason: "length", usage, timings },
    ]);
    expect(types.at(-1)).toBe("response.incomplete");
    expect(response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect(response.output[0]).toMatchObject({ type: "message", status: "incomplete" });
  });

  it("answers an empty generation with no output items", () => {
    const { types, response } = run([{ type: "done", finishReason: "stop", usage, timings }]);
    expect(types).toEqual(["response.created", "response.in_progress", "response.completed"]);
    expect(response.output).toEqual([]);
    expect(response.output_text).toBe("");
  });
});
