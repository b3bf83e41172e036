// Issue 14, Responses API: the official `openai` client's `responses` resource against the real
// server on the generated test model, raw checks of the typed event stream, and every error case
// in the OpenAI error shape.
import { Ajv } from "ajv";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEST_MODEL_THOUGHT } from "../../src/testmodels/thoughtWiring.js";
import { postJson, readNamedEvents, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const weather = {
  type: "object",
  properties: { city: { type: "string", maxLength: 12 }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
} as const;
const tools: OpenAI.Responses.FunctionTool[] = [
  { type: "function", name: "get_weather", description: "Current weather in a city", parameters: weather, strict: true },
];
const ajv = new Ajv({ strict: false });

interface RawEvent {
  event: string;
  data: { type: string; sequence_number: number; [key: string]: unknown };
}

/** A typed SSE body's events, each `event: <type>` then `data: {…}` with the same type. */
const readTypedEvents = (response: Response): Promise<RawEvent[]> => readNamedEvents<RawEvent["data"]>(response);

describe("Responses API", () => {
  let server: TestServer;
  let client: OpenAI;
  let url: string;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { contextSize: 2048 } });
    client = server.client;
    url = `${server.url}/v1/responses`;
  });
  afterAll(() => server?.close());

  it("answers a string input with a complete response object", async () => {
    // A short bounded answer, so that the random model ends by itself: status completed.
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const format = { type: "json_schema" as const, name: "answer", schema, strict: true };
    const response = await client.responses.create({
      model: "tiny",
      input: "Hello there.",
      max_output_tokens: 100,
      temperature: 0,
      text: { format },
    });
    expect(response.id).toMatch(/^resp_[A-Za-z0-9]{40}$/);
    expect(response.object).toBe("response");
    expect(response.model).toBe("tiny");
    expect(response.status).toBe("completed");
    expect(response.error).toBeNull();
    expect(response.incomplete_details).toBeNull();
    // Not in the SDK's type, but on OpenAI's wire.
    expect((response as unknown as { store: boolean }).store).toBe(true);
    expect(response.temperature).toBe(0);
    expect(response.top_p).toBe(1);
    expect(response.tool_choice).toBe("auto");
    expect(response.tools).toEqual([]);
    expect(response.parallel_tool_calls).toBe(true);
    expect(response.text).toEqual({ format, verbosity: "medium" });
    expect(response.metadata).toEqual({});
    expect(response.completed_at).toBeGreaterThanOrEqual(response.created_at);
    const [message] = response.output;
    if (message?.type !== "message") throw new Error(`expected a message, got ${JSON.stringify(response.output)}`);
    expect(message.id).toMatch(/^msg_/);
    expect(message.role).toBe("assistant");
    expect(message.status).toBe("completed");
    expect(message.content).toEqual([{ type: "output_text", text: expect.any(String), annotations: [], logprobs: [] }]);
    // The SDK computes output_text from the message parts.
    expect(response.output_text).toBe(message.content[0]?.type === "output_text" ? message.content[0].text : undefined);
    expect(JSON.parse(response.output_text)).toEqual({ ok: expect.any(Boolean) });
    const usage = response.usage!;
    expect(usage.input_tokens).toBeGreaterThan(0);
    expect(usage.output_tokens).toBeGreaterThan(0);
    expect(usage.total_tokens).toBe(usage.input_tokens + usage.output_tokens);
    expect(usage.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(0);
  });

  it("stops at max_output_tokens with status incomplete", async () => {
    const response = await client.responses.create({
      model: "tiny",
      input: [{ role: "user", content: "Tell a long story." }],
      max_output_tokens: 3,
    });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.usage?.output_tokens).toBe(3);
    expect(response.output[0]).toMatchObject({ type: "message", status: "incomplete" });
  });

  it("streams typed events in OpenAI's order, numbered from 0, and the helper's final response equals the last event's", async () => {
    const response = await postJson(url, {
      model: "tiny",
      input: "Hello.",
      instructions: "Be brief.",
      stream: true,
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await readTypedEvents(response);
    expect(events.map((event) => event.data.sequence_number)).toEqual(events.map((_, i) => i));
    const types = events.map((event) => event.event);
    const deltas = types.filter((type) => type === "response.output_text.delta").length;
    expect(deltas).toBeGreaterThan(0);
    const final = types.at(-1);
    expect(final === "response.completed" || final === "response.incomplete").toBe(true);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(deltas).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      final,
    ]);
    expect(events[0]!.data).toMatchObject({ response: { status: "in_progress", output: [], usage: null, instructions: "Be brief." } });
    const text = events
      .filter((event) => event.event === "response.output_text.delta")
      .map((event) => event.data.delta)
      .join("");
    expect(events.find((event) => event.event === "response.output_text.done")!.data.text).toBe(text);
    const last = events.at(-1)!.data as unknown as { response: OpenAI.Responses.Response };
    expect(last.response.output).toEqual([expect.objectContaining({ type: "message", content: [expect.objectContaining({ text })] })]);

    // The official helper accumulates the same events into the same response.
    const stream = client.responses.stream({
      model: "tiny",
      input: "Hello.",
      instructions: "Be brief.",
      max_output_tokens: 8,
      temperature: 0,
    });
    let streamed = "";
    stream.on("response.output_text.delta", (event) => (streamed += event.delta));
    const finalResponse = await stream.finalResponse();
    expect(streamed).toBe(text);
    expect(finalResponse.output_text).toBe(text);
    // Greedy decoding: the same text as not streamed.
    const plain = await client.responses.create({
      model: "tiny",
      input: "Hello.",
      instructions: "Be brief.",
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(plain.output_text).toBe(text);
  });

  it("calls a function, streamed and not, and completes the round trip with function_call_output", async () => {
    const request = {
      model: "tiny",
      input: "What is the weather in Paris?",
      tools,
      tool_choice: "required" as const,
      parallel_tool_calls: false,
      temperature: 0,
      max_output_tokens: 400,
    };
    const first = await client.responses.create(request);
    expect(first.status).toBe("completed");
    const calls = first.output.filter((item) => item.type === "function_call");
    expect(calls).toHaveLength(1);
    const call = calls[0]!;
    expect(call.id).toMatch(/^fc_/);
    expect(call.call_id).toMatch(/^call_/);
    expect(call.name).toBe("get_weather");
    expect(call.status).toBe("completed");
    expect(ajv.validate(weather, JSON.parse(call.arguments)), call.arguments).toBe(true);

    // Streamed: the arguments arrive as deltas that add up to the same call.
    const response = await postJson(url, { ...request, stream: true });
    const events = await readTypedEvents(response);
    const types = events.map((event) => event.event);
    const added = events.find((event) => event.event === "response.output_item.added")!.data;
    expect(added.item).toMatchObject({ type: "function_call", status: "in_progress", arguments: "", name: "get_weather" });
    const deltas = events.filter((event) => event.event === "response.function_call_arguments.delta");
    expect(deltas.length).toBeGreaterThan(0);
    const done = events.find((event) => event.event === "response.function_call_arguments.done")!.data;
    expect(done.arguments).toBe(deltas.map((event) => event.data.delta).join(""));
    expect(done.arguments).toBe(call.arguments);
    expect(types.slice(-2)).toEqual(["response.output_item.done", "response.completed"]);

    // The round trip: the call and its output go back as input items; the model answers in text.
    const followUp = { model: "tiny", tools, tool_choice: "none" as const, max_output_tokens: 12, store: false };
    const second = await client.responses.create({
      ...followUp,
      input: [
        { role: "user", content: "What is the weather in Paris?" },
        ...first.output.filter((item) => item.type === "function_call"),
        { type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ temperature: 21 }) },
      ],
    });
    expect(second.output.every((item) => item.type === "message")).toBe(true);
    // The call and its output are in the prompt: longer than the question alone.
    const questionOnly = await client.responses.create({ ...followUp, input: "What is the weather in Paris?" });
    expect(second.usage!.input_tokens).toBeGreaterThan(questionOnly.usage!.input_tokens + 10);
    expect((second as unknown as { store: boolean }).store).toBe(false);
    await expect(client.responses.retrieve(second.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  /** A stored response that is one forced call of `get_weather`, and that call. */
  const storedCall = async () => {
    const first = await client.responses.create({
      model: "tiny",
      input: "Weather in Paris?",
      tools,
      tool_choice: "required",
      parallel_tool_calls: false,
      temperature: 0,
      max_output_tokens: 400,
    });
    const call = first.output.find((item) => item.type === "function_call");
    if (call?.type !== "function_call") throw new Error("expected a call");
    return { first, call };
  };

  it("continues a stored function call with its output through previous_response_id, as agent loops do", async () => {
    const { first, call } = await storedCall();
    const second = await client.responses.create({
      model: "tiny",
      tools,
      tool_choice: "none",
      max_output_tokens: 4,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "21 degrees" }],
    });
    expect(second.output.map((item) => item.type)).toEqual(["message"]);
    const items = await client.responses.inputItems.list(second.id, { order: "asc" });
    expect(items.data.map((item) => item.type)).toEqual(["message", "function_call", "function_call_output"]);
    expect(items.data[2]).toMatchObject({
      type: "function_call_output",
      id: expect.stringMatching(/^fco_/),
      call_id: call.call_id,
      output: "21 degrees",
      status: "completed",
    });
    // The call's output must answer a call: an unknown call_id is refused even after a stored conversation.
    await expect(
      client.responses.create({
        model: "tiny",
        previous_response_id: first.id,
        input: [{ type: "function_call_output", call_id: "call_other", output: "x" }],
      }),
    ).rejects.toMatchObject({
      status: 400,
      error: { param: "input[0].call_id" },
    });
  });

  it("structured output: json_schema text format validates, json_object parses", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 10 }, ok: { type: "boolean" } },
      required: ["name", "ok"],
      additionalProperties: false,
    };
    const response = await client.responses.create({
      model: "tiny",
      input: "Fill the form.",
      temperature: 0.8,
      max_output_tokens: 400,
      text: { format: { type: "json_schema", name: "form", schema, strict: true } },
    });
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "form" });
    expect(response.status).toBe("completed");
    expect(ajv.validate(schema, JSON.parse(response.output_text)), response.output_text).toBe(true);
    const object = await client.responses.create({
      model: "tiny",
      input: "JSON please.",
      temperature: 0.9,
      max_output_tokens: 300,
      text: { format: { type: "json_object" } },
    });
    if (object.status === "completed") expect(typeof JSON.parse(object.output_text)).toBe("object");
    else expect(object.output_text.startsWith("{")).toBe(true);
  });

  it('returns the answer\'s token log-probabilities with include ["message.output_text.logprobs"], streamed and not', async () => {
    const request = {
      model: "tiny",
      input: "Hello.",
      max_output_tokens: 6,
      temperature: 0,
      top_logprobs: 2,
      include: ["message.output_text.logprobs" as const],
      store: false,
    };
    const response = await client.responses.create(request);
    const part = response.output[0]?.type === "message" ? response.output[0].content[0] : undefined;
    if (part?.type !== "output_text") throw new Error("expected output text");
    expect(part.logprobs).toHaveLength(6);
    for (const logprob of part.logprobs ?? []) {
      expect(logprob.logprob).toBeLessThanOrEqual(0);
      expect(logprob.top_logprobs).toHaveLength(2);
      expect(Buffer.from(logprob.bytes).toString("utf8")).toBe(logprob.token);
    }
    expect(Buffer.from((part.logprobs ?? []).flatMap((logprob) => logprob.bytes)).toString("utf8")).toBe(part.text);
    const events = await readTypedEvents(await postJson(url, { ...request, stream: true }));
    const deltas = events
      .filter((event) => event.event === "response.output_text.delta")
      .flatMap((event) => event.data.logprobs as unknown[]);
    expect(deltas).toEqual(part.logprobs);
    expect(events.find((event) => event.event === "response.content_part.added")!.data.part).toEqual({
      type: "output_text",
      text: "",
      annotations: [],
      logprobs: [],
    });
    // Without include, none.
    const plain = await client.responses.create({ ...request, include: [] });
    expect(plain.output[0]?.type === "message" && plain.output[0].content[0]).toMatchObject({ logprobs: [] });
  });

  it("resolves item_reference input items against stored items: messages, function calls and their outputs, input or output", async () => {
    const { first, call } = await storedCall();
    const [question] = (await client.responses.inputItems.list(first.id)).data;
    const second = await client.responses.create({
      model: "tiny",
      tools,
      tool_choice: "none",
      max_output_tokens: 4,
      input: [
        { type: "item_reference", id: question!.id },
        { type: "item_reference", id: call.id! },
        { type: "function_call_output", call_id: call.call_id, output: "21 degrees" },
      ],
    });
    // Listed as the items they name, with their ids.
    const items = (await client.responses.inputItems.list(second.id, { order: "asc" })).data;
    expect(items[0]).toEqual(question);
    expect(items[1]).toEqual(call);
    const output = items[2]!;
    // The same as sending the items themselves.
    const inline = await client.responses.create({
      model: "tiny",
      tools,
      tool_choice: "none",
      max_output_tokens: 4,
      store: false,
      input: [
        { role: "user", content: "Weather in Paris?" },
        call,
        { type: "function_call_output", call_id: call.call_id, output: "21 degrees" },
      ],
    });
    expect(second.usage?.input_tokens).toBe(inline.usage?.input_tokens);
    // A function_call_output and an answer are referenceable too: a third turn by references only, streamed.
    const answer = second.output[0]!;
    const references = [question!, call, output, answer].map((item) => ({ type: "item_reference", id: item.id }));
    const response = await postJson(url, {
      model: "tiny",
      stream: true,
      max_output_tokens: 2,
      input: [...references, { type: "message", role: "user", content: "Thanks." }],
    });
    const events = await readTypedEvents(response);
    expect(events.at(-1)?.event).toMatch(/^response\.(completed|incomplete)$/);
    const third = (events.at(-1)!.data as unknown as { response: { id: string } }).response.id;
    expect((await client.responses.inputItems.list(third, { order: "asc" })).data.slice(0, 4)).toEqual([question, call, output, answer]);
  });

  it("does not resolve references to items of responses not stored, or deleted, or unknown: 400 as OpenAI", async () => {
    const unstored = await client.responses.create({ model: "tiny", input: "Hi.", max_output_tokens: 2, store: false });
    const deleted = await client.responses.create({ model: "tiny", input: "Hi.", max_output_tokens: 2 });
    await client.responses.delete(deleted.id);
    for (const id of [unstored.output[0]!.id!, deleted.output[0]!.id!, "msg_unknown"]) {
      const response = await postJson(url, {
        model: "tiny",
        input: [
          { type: "item_reference", id },
          { role: "user", content: "Go on." },
        ],
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: {
          message: `Item with id '${id}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`,
          type: "invalid_request_error",
          param: "input",
          code: null,
        },
      });
    }
  });

  it("stores responses: retrieve, continue with previous_response_id, list input items, delete", async () => {
    const first = await client.responses.create({
      model: "tiny",
      input: "My name is Ada.",
      instructions: "Answer briefly.",
      max_output_tokens: 6,
      metadata: { topic: "names" },
      user: "u-1",
    });
    expect(first.metadata).toEqual({ topic: "names" });
    expect(first.user).toBe("u-1");
    const retrieved = await client.responses.retrieve(first.id);
    expect(retrieved).toEqual(first);

    const second = await client.responses.create({
      model: "tiny",
      input: "What is my name?",
      previous_response_id: first.id,
      max_output_tokens: 6,
    });
    expect(second.previous_response_id).toBe(first.id);
    // The stored conversation is the prefix; the instructions are not inherited.
    expect(second.instructions).toBeNull();
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);

    // Input items: the first's input, its output, then the second's input, newest first by default.
    const items: OpenAI.Responses.ResponseItem[] = [];
    for await (const item of client.responses.inputItems.list(second.id, { limit: 1 })) items.push(item);
    expect(items).toHaveLength(3);
    expect(items[0]).toMatchObject({ type: "message", role: "user", content: [{ type: "input_text", text: "What is my name?" }] });
    expect(items[1]).toEqual(first.output[0]);
    expect(items[2]).toMatchObject({ type: "message", role: "user", content: [{ type: "input_text", text: "My name is Ada." }] });
    const ascending = await client.responses.inputItems.list(second.id, { order: "asc" });
    expect(ascending.data.map((item) => item.id)).toEqual(items.map((item) => item.id).reverse());
    expect(ascending.has_more).toBe(false);
    const page = (await fetch(`${url}/${second.id}/input_items?limit=2`).then((r) => r.json())) as Record<string, unknown>;
    expect(page).toEqual({ object: "list", data: items.slice(0, 2), first_id: items[0]!.id, last_id: items[1]!.id, has_more: true });

    const deleted = await fetch(`${url}/${first.id}`, { method: "DELETE" }).then((r) => r.json());
    expect(deleted).toEqual({ id: first.id, object: "response.deleted", deleted: true });
    await client.responses.delete(second.id);
    await expect(client.responses.retrieve(first.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.create({ model: "tiny", input: "Again?", previous_response_id: first.id })).rejects.toMatchObject({
      status: 400,
      error: {
        type: "invalid_request_error",
        param: "previous_response_id",
        message: `Previous response with id '${first.id}' not found.`,
      },
      // The reference's own code for it, not the null of field validation.
      code: "previous_response_not_found",
    });
  });

  it("takes user: null as no user, and previous_response_id without input (the stored conversation is answered)", async () => {
    const first = await postJson(url, { model: "tiny", input: "My name is Ada.", max_output_tokens: 3, user: null });
    expect(first.status).toBe(200);
    const stored = (await first.json()) as OpenAI.Responses.Response;
    expect(stored.user).toBeNull();

    const next = await client.responses.create({ model: "tiny", previous_response_id: stored.id, max_output_tokens: 2 });
    expect(next.previous_response_id).toBe(stored.id);
    expect(next.usage!.input_tokens).toBeGreaterThan(stored.usage!.input_tokens);
    // Its input items are the stored conversation only: it added none.
    const items = await client.responses.inputItems.list(next.id, { order: "asc" });
    expect(items.data.map((item) => item.id)).toEqual(
      [...(await client.responses.inputItems.list(stored.id, { order: "asc" })).data, ...stored.output].map((item) => item.id),
    );
    // Without previous_response_id, input is required.
    const missing = await postJson(url, { model: "tiny", user: null });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { param: string; message: string } }).error).toMatchObject({
      param: "input",
      message: expect.stringMatching(/Missing required parameter: 'input'/),
    });
  });

  it("stores a streamed response before its final event, so it can be continued at once", async () => {
    const stream = await client.responses.create({ model: "tiny", input: "Hi.", stream: true, max_output_tokens: 4 });
    let id = "";
    for await (const event of stream)
      if (event.type === "response.completed" || event.type === "response.incomplete") id = event.response.id;
    const retrieved = await client.responses.retrieve(id);
    expect(retrieved.status).toMatch(/^(completed|incomplete)$/);
    const next = await client.responses.create({ model: "tiny", input: "And?", previous_response_id: id, max_output_tokens: 2 });
    expect(next.previous_response_id).toBe(id);
  });

  it.each([
    [{ input: "x" }, 400, "model"],
    [{ model: "tiny" }, 400, "input"],
    [{ model: "tiny", input: 5 }, 400, "input"],
    [{ model: "tiny", input: [] }, 400, "input"],
    [{ model: "tiny", input: [{ role: "user", content: 5 }] }, 400, "input[0].content"],
    [{ model: "tiny", input: [{ role: "robot", content: "x" }] }, 400, "input[0].role"],
    [
      { model: "tiny", input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] },
      400,
      "input[0].content[0].image_url",
    ],
    [
      { model: "tiny", input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] },
      400,
      "input[0].content[0].image_url",
    ],
    [
      { model: "tiny", input: [{ role: "system", content: [{ type: "input_image", image_url: "data:," }] }] },
      400,
      "input[0].content[0].type",
    ],
    [{ model: "tiny", input: [{ role: "user", content: [{ type: "input_text" }] }] }, 400, "input[0].content[0].text"],
    [{ model: "tiny", input: [{ type: "item_reference", id: "msg_1" }] }, 400, "input"],
    [{ model: "tiny", input: [{ type: "item_reference" }] }, 400, "input[0].id"],
    [{ model: "nope", input: [{ type: "item_reference", id: "msg_1" }] }, 404, "model"],
    [{ model: "tiny", input: [{ type: "function_call", name: "f", arguments: "{}" }] }, 400, "input[0].call_id"],
    [{ model: "tiny", input: [{ type: "function_call_output", call_id: "call_x", output: "1" }] }, 400, "input[0].call_id"],
    [{ model: "tiny", input: "x", tools: [{ type: "web_search" }] }, 400, "tools[0].type"],
    [{ model: "tiny", input: "x", tools: [{ type: "function", name: "bad name" }] }, 400, "tools[0].name"],
    [
      { model: "tiny", input: "x", tools: [{ type: "function", name: "f", parameters: { type: "string" } }] },
      400,
      "tools[0].parameters.type",
    ],
    [{ model: "tiny", input: "x", tools: [tools[0], tools[0]] }, 400, "tools[1].name"],
    [{ model: "tiny", input: "x", tool_choice: "required" }, 400, "tool_choice"],
    [{ model: "tiny", input: "x", tools, tool_choice: { type: "function", name: "missing" } }, 400, "tool_choice.name"],
    [{ model: "tiny", input: "x", tools, tool_choice: { type: "web_search_preview" } }, 400, "tool_choice.type"],
    [{ model: "tiny", input: "x", tools, tool_choice: "sometimes" }, 400, "tool_choice"],
    [{ model: "tiny", input: "x", max_output_tokens: 0 }, 400, "max_output_tokens"],
    [{ model: "tiny", input: "x", temperature: 3 }, 400, "temperature"],
    [{ model: "tiny", input: "x", top_p: 2 }, 400, "top_p"],
    [{ model: "tiny", input: "x", text: { format: { type: "yaml" } } }, 400, "text.format.type"],
    [
      {
        model: "tiny",
        input: "x",
        text: { format: { type: "json_schema", name: "s", schema: { type: "object", properties: { n: { type: "number", minimum: 3 } } } } },
      },
      400,
      "text.format.schema.properties.n.minimum",
    ],
    [{ model: "tiny", input: "x", metadata: { k: "v".repeat(513) } }, 400, "metadata.k"],
    [{ model: "tiny", input: "x", metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, 400, "metadata"],
    [{ model: "tiny", input: "x", background: true }, 400, "background"],
    [{ model: "tiny", input: "x", conversation: "conv_1" }, 400, "conversation"],
    [{ model: "tiny", input: "x", previous_response_id: "resp_unknown" }, 400, "previous_response_id"],
    [{ model: "tiny", input: "x", stream: "yes" }, 400, "stream"],
    [{ model: "nope", input: "x" }, 404, "model"],
    [{ model: "nope", input: [{ role: "user", content: [{ type: "input_image", image_url: "https://x/y.png" }] }] }, 404, "model"],
  ])("refuses %j with %i naming %s, in the OpenAI shape", async (body, status, param) => {
    const response = await postJson(url, body);
    expect(response.status).toBe(status);
    const error = ((await response.json()) as { error: { param: string; type: string; message: string; code: string | null } }).error;
    expect(error.type).toBe("invalid_request_error");
    expect(error.param).toBe(param);
    expect(error.message.length).toBeGreaterThan(0);
  });

  it("answers an unknown previous_response_id with 400 and the code previous_response_not_found", async () => {
    const response = await postJson(url, { model: "tiny", input: "x", previous_response_id: "resp_unknown" });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      error: {
        message: "Previous response with id 'resp_unknown' not found.",
        type: "invalid_request_error",
        param: "previous_response_id",
        code: "previous_response_not_found",
      },
    });
  });

  it("answers unknown ids with 404 in the OpenAI shape, and a bad body with 400, then still serves", async () => {
    for (const [method, path] of [
      ["GET", "/resp_nope"],
      ["DELETE", "/resp_nope"],
      ["GET", "/resp_nope/input_items"],
    ] as const) {
      const response = await fetch(`${url}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(await response.json()).toEqual({
        error: { message: "Response with id 'resp_nope' not found.", type: "invalid_request_error", param: null, code: "not_found" },
      });
    }
    const stored = await client.responses.create({ model: "tiny", input: "x", max_output_tokens: 1 });
    const badPage = await fetch(`${url}/${stored.id}/input_items?limit=0`);
    expect(badPage.status).toBe(400);
    expect(((await badPage.json()) as { error: { param: string } }).error.param).toBe("limit");
    const replay = await fetch(`${url}/${stored.id}?stream=true`);
    expect(replay.status).toBe(400);
    const notJson = await postJson(url, "{not json");
    expect(notJson.status).toBe(400);
    expect(((await notJson.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
    const after = await client.responses.create({ model: "tiny", input: "still there?", max_output_tokens: 2 });
    expect(after.status).toMatch(/^(completed|incomplete)$/);
  });

  it("a client that disconnects mid-stream frees its slot at once, and nothing is stored", async () => {
    const controller = new AbortController();
    const response = await postJson(
      url,
      { model: "tiny", input: "Tell a long story.", stream: true, max_output_tokens: 1900 },
      { signal: controller.signal },
    );
    const reader = response.body!.getReader();
    let head = "";
    while (!head.includes("response.output_text.delta")) head += new TextDecoder().decode((await reader.read()).value);
    const id = /"id":"(resp_[A-Za-z0-9]+)"/.exec(head)![1]!;
    const active = async () => {
      const health = (await (await fetch(`${server.url}/health`)).json()) as { loaded: Array<{ id: string; active: number }> };
      return health.loaded.find((entry) => entry.id === "tiny")?.active;
    };
    expect(await active()).toBe(1);
    controller.abort();
    await expect.poll(active, { timeout: 2000, interval: 20 }).toBe(0);
    await expect(client.responses.retrieve(id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("Responses API on a thinking model", () => {
  let server: TestServer;
  let client: OpenAI;
  const request = { model: "think", input: "How far is the river?", temperature: 0, max_output_tokens: 16 };

  beforeAll(async () => {
    server = await startTestServer({ models: { think: await testModelPath("think-tiny") } });
    client = server.client;
  });
  afterAll(() => server?.close());

  it("returns the thought as a reasoning item before the message", async () => {
    const response = await client.responses.create(request);
    expect(response.output.map((item) => item.type)).toEqual(["reasoning", "message"]);
    const [reasoning, message] = response.output;
    expect(reasoning).toEqual({
      type: "reasoning",
      id: expect.stringMatching(/^rs_/),
      summary: [],
      content: [{ type: "reasoning_text", text: TEST_MODEL_THOUGHT }],
      status: "completed",
    });
    expect(message).toMatchObject({ type: "message", status: "incomplete" });
    expect(response.output_text).toMatch(/\S/);
    expect(response.output_text).not.toContain(TEST_MODEL_THOUGHT);
    expect(response.output_text).not.toMatch(/<\/?think>/);
    // The thought's tokens are output tokens, and counted apart too.
    expect(response.usage?.output_tokens).toBe(16);
    expect(response.usage?.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    expect(response.usage?.output_tokens_details.reasoning_tokens).toBeLessThan(16);
  });

  it("streams the reasoning item with reasoning_text events, then the message; the SDK helper accumulates both", async () => {
    const events = await readTypedEvents(await postJson(`${server.url}/v1/responses`, { ...request, stream: true }));
    const types = events.map((event) => event.event);
    const thoughtDeltas = types.filter((type) => type === "response.reasoning_text.delta").length;
    const textDeltas = types.filter((type) => type === "response.output_text.delta").length;
    expect(thoughtDeltas).toBeGreaterThan(1);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(thoughtDeltas).fill("response.reasoning_text.delta"),
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      ...Array<string>(textDeltas).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.incomplete",
    ]);
    expect(events.map((event) => event.data.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[2]!.data).toMatchObject({ output_index: 0, item: { type: "reasoning", content: [], summary: [] } });
    expect(events[3]!.data).toMatchObject({ output_index: 0, content_index: 0, part: { type: "reasoning_text", text: "" } });
    const thought = events
      .filter((event) => event.event === "response.reasoning_text.delta")
      .map((event) => event.data.delta)
      .join("");
    expect(thought).toBe(TEST_MODEL_THOUGHT);

    const final = await client.responses.stream(request).finalResponse();
    expect(final.output[0]).toMatchObject({ type: "reasoning", content: [{ type: "reasoning_text", text: TEST_MODEL_THOUGHT }] });
    expect(final.output_text).toBe((await client.responses.create(request)).output_text);
  });

  it('reasoning.effort "none" turns thinking off: no reasoning item; other efforts leave it on', async () => {
    const off = await client.responses.create({ ...request, reasoning: { effort: "none" } });
    expect(off.output.map((item) => item.type)).toEqual(["message"]);
    expect(off.output_text).not.toContain(TEST_MODEL_THOUGHT);
    expect(off.reasoning).toEqual({ effort: "none", summary: null });
    const on = await client.responses.create({ ...request, reasoning: { effort: "low" } });
    expect(on.output[0]).toMatchObject({ type: "reasoning" });
  });

  it("continues a conversation whose stored output holds a reasoning item, and takes it back as input", async () => {
    const first = await client.responses.create(request);
    const next = await client.responses.create({ ...request, input: "And then?", previous_response_id: first.id });
    expect(next.output[0]).toMatchObject({ type: "reasoning" });
    // The output items as the SDK types input (its output union is wider than what it accepts back).
    const output = first.output as OpenAI.Responses.ResponseInputItem[];
    // Sent back by hand: the reasoning item is accepted, and left out of the prompt as templates drop old thoughts.
    const withThought = await client.responses.create({
      ...request,
      store: false,
      input: [{ role: "user", content: "How far is the river?" }, ...output, { role: "user", content: "And then?" }],
    });
    const withoutThought = await client.responses.create({
      ...request,
      store: false,
      input: [
        { role: "user", content: "How far is the river?" },
        ...output.filter((item) => item.type !== "reasoning"),
        { role: "user", content: "And then?" },
      ],
    });
    expect(withThought.usage?.input_tokens).toBe(withoutThought.usage?.input_tokens);
    expect(next.usage?.input_tokens).toBe(withThought.usage?.input_tokens);
  });
});

describe("stored responses expire after --response-expiry, 30 days by default, by the server's clock", () => {
  let server: TestServer;
  let now = Date.UTC(2026, 0, 1);
  const days = (n: number) => n * 24 * 3_600_000;

  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") }, now: () => now });
  });
  afterAll(() => server?.close());

  it("keeps a response retrievable and continuable until 30 days after storing it, then it is gone", async () => {
    const { client } = server;
    const stored = await client.responses.create({ model: "tiny", input: "Remember me.", max_output_tokens: 1 });
    now += days(30) - 1;
    expect((await client.responses.retrieve(stored.id)).id).toBe(stored.id);
    const next = await client.responses.create({
      model: "tiny",
      input: "Still there?",
      previous_response_id: stored.id,
      max_output_tokens: 1,
    });
    now += 1;
    await expect(client.responses.retrieve(stored.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.responses.create({ model: "tiny", input: "And now?", previous_response_id: stored.id })).rejects.toMatchObject({
      status: 400,
      code: "previous_response_not_found",
    });
    // The one stored a moment before the first expired has its own 30 days.
    expect((await client.responses.retrieve(next.id)).id).toBe(next.id);
  });
});
