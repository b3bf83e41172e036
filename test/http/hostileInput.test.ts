// Issue 8 §3 and §4: hostile or careless input gets a 400 in the OpenAI shape that names the
// limit, never a 500 or a stack overflow, and never a stalled server.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH, MAX_REQUEST_SCHEMA_NODES, MAX_SCHEMA_NODES } from "../../src/core/jsonLimits.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const user = { role: "user", content: "hi" };

describe("hostile input", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ models: { tiny: await testModelPath("tiny") } });
  });
  afterAll(() => server?.close());

  const expect400 = async (response: Response, message: RegExp) => {
    const body = (await response.json()) as { error: { type: string; message: string; param: string | null } };
    expect([response.status, body.error.type]).toEqual([400, "invalid_request_error"]);
    expect(body.error.message).toMatch(message);
    return body.error;
  };
  const chat = (body: object) => postJson(`${server.url}/v1/chat/completions`, { model: "tiny", max_tokens: 1, ...body });

  it("answers 400 to a Content-Type that is not a media type, and still reads bodies of odd but valid ones", async () => {
    const body = JSON.stringify({ model: "tiny", messages: [user], max_tokens: 1 });
    for (const type of ["x", "", "application/json, text/plain"]) {
      const response = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": type }, body });
      await expect400(response, /Content-Type header is not a valid media type/);
    }
    const plain = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "text/plain" }, body });
    expect(plain.status).toBe(200);
  });

  it(`refuses bodies nested deeper than ${MAX_JSON_DEPTH} levels, and accepts that depth`, async () => {
    await expect400(
      await postJson(`${server.url}/v1/chat/completions`, `{"model":"tiny","messages":${nested(5000)}}`),
      /deeper than 128 levels/,
    );
    const response = await postJson(
      `${server.url}/v1/chat/completions`,
      `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","x":${nested(2000)}}}}]}`,
    );
    // An unknown keyword of tool parameters, nested deep: refused before the template renders it.
    await expect400(response, /deeper than 128/);
    const fits = await chat({ messages: [user], metadata: JSON.parse(nested(MAX_JSON_DEPTH - 2)) as unknown });
    expect(fits.status).toBe(200);
  });

  it("refuses deep JSON in tool-call arguments and tool results before the prompt is rendered", async () => {
    const call = { id: "call_1", type: "function", function: { name: "f", arguments: nested(3000) } };
    const error = await expect400(await chat({ messages: [user, { role: "assistant", tool_calls: [call] }] }), /deeper than 128/);
    expect(error.param).toBe("messages[1].tool_calls[0].function.arguments");
    const answered = { ...call, function: { name: "f", arguments: "{}" } };
    const result = await expect400(
      await chat({
        messages: [user, { role: "assistant", tool_calls: [answered] }, { role: "tool", tool_call_id: "call_1", content: nested(3000) }],
      }),
      /deeper than 128/,
    );
    expect(result.param).toBe("messages[2].content");
  });

  it(`refuses schemas of more than ${MAX_SCHEMA_NODES} subschemas: wide, long $ref chains, huge oneOf`, async () => {
    const wide = { type: "object", properties: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`p${i}`, { type: "integer" }])) };
    const $defs = Object.fromEntries(
      Array.from({ length: 1200 }, (_, i) => [
        `d${i}`,
        i === 1199 ? { type: "string" } : { type: "object", properties: { next: { $ref: `#/$defs/d${i + 1}` } }, required: ["next"] },
      ]),
    );
    const chain = { $ref: "#/$defs/d0", $defs };
    const oneOf = { oneOf: Array.from({ length: 30_000 }, (_, i) => ({ const: i })) };
    for (const schema of [wide, chain, oneOf]) {
      const response = await chat({ messages: [user], response_format: { type: "json_schema", json_schema: { name: "s", schema } } });
      await expect400(response, /too large: at most 512 subschemas/);
      const tools = [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: schema } } } }];
      await expect400(await chat({ messages: [user], tools, tool_choice: "auto" }), /too large/);
    }
  });

  it(`refuses requests whose schemas hold more than ${MAX_REQUEST_SCHEMA_NODES} subschemas together, in every protocol`, async () => {
    // Each schema is under the per-schema limit; together they are not (5 × 500 objects).
    const parameters = (t: number) => ({
      type: "object",
      properties: Object.fromEntries(Array.from({ length: 499 }, (_, i) => [`p${t}_${i}`, { type: "string" }])),
    });
    const tools = Array.from({ length: 5 }, (_, t) => ({ type: "function", function: { name: `f${t}`, parameters: parameters(t) } }));
    const error = await expect400(await chat({ messages: [user], tools }), /more than 2048 subschemas \(objects\) together/);
    expect(error.param).toBe("tools");
    const native = await postJson(`${server.url}/api/chat`, { model: "tiny", messages: [user], tools, stream: false });
    expect(native.status).toBe(400);
    expect(((await native.json()) as { error: string }).error).toMatch(/more than 2048 subschemas/);
    // Four of them fit the budget; that prompt is too long for this model's context, which is
    // found before their grammar is compiled.
    const fits = await chat({ messages: [user], tools: tools.slice(0, 4) });
    expect(fits.status).toBe(400);
    expect(((await fits.json()) as { error: { code: string } }).error.code).toBe("context_length_exceeded");
  });

  it("keeps answering /health while the largest accepted oneOf is checked and compiled", async () => {
    const oneOf = { oneOf: Array.from({ length: MAX_SCHEMA_NODES - 1 }, (_, i) => ({ const: i })) };
    const latencies: number[] = [];
    let running = true;
    const poller = (async () => {
      // At least five polls, so a request quicker than that still leaves a median to compare with.
      while (running || latencies.length < 5) {
        const started = performance.now();
        await fetch(`${server.url}/health`);
        latencies.push(performance.now() - started);
      }
    })();
    const response = await chat({ messages: [user], response_format: { type: "json_schema", json_schema: { name: "s", schema: oneOf } } });
    running = false;
    await poller;
    expect(response.status).toBe(200);
    latencies.sort((a, b) => a - b);
    const median = latencies[Math.floor(latencies.length / 2)] ?? 0;
    // Generous: no poll waited 50 medians (how many polls fit in the request varies by machine).
    expect(latencies.at(-1)).toBeLessThan(Math.max(50 * median, 250));
    if (process.env.MODELHOST_REPORT)
      console.log(`health polls ${latencies.length}, median ${median.toFixed(1)} ms, worst ${latencies.at(-1)?.toFixed(1)} ms`);
  });
});
