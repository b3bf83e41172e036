import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { rawRequest } from "../support/rawHttp.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

// The Messages API in the hosted profile: the same tokens, limits and usage ledger as /v1/chat,
// the token in x-api-key (what the Anthropic SDK sends) or Authorization: Bearer, and the hosted
// refusals (401, 429, 413) in the Messages error shape. The gate's work, not the model's: a fake engine.

const tiers = {
  default: "free",
  tiers: {
    free: { requestsPerMinute: 15, tokensPerDay: 150_000 },
    single: { requestsPerMinute: 1 },
    capped: { requestsPerMinute: 1000, maxInputTokens: 5 },
  },
};
const request = { model: "tiny", max_tokens: 3, messages: [{ role: "user" as const, content: "Hello there." }] };

describe("Messages API in the hosted profile", () => {
  let hosted: Hosted;
  let server: TestServer;

  const newToken = (tier: keyof typeof tiers.tiers) => hosted.newAccount(tier);
  const anthropic = (options: ConstructorParameters<typeof Anthropic>[0]) =>
    new Anthropic({ baseURL: server.url, maxRetries: 0, ...options });
  /** The account's ledger row once it holds `requests` requests: the ledger is written by group commit within milliseconds. */
  const ledgerRow = async (account: string, requests: number) => {
    await expect
      .poll(async () => (await hosted.accounts.usage({ account }))[0]?.requests ?? 0, { timeout: 2500, interval: 50 })
      .toBeGreaterThanOrEqual(requests);
    return (await hosted.accounts.usage({ account }))[0];
  };

  beforeAll(async () => {
    hosted = await openHosted({ tiers });
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny"] }) });
  });
  afterAll(async () => {
    await hosted?.close();
  });

  it("serves a token sent as x-api-key (the SDK's apiKey) or as Authorization: Bearer (its authToken), and records usage", async () => {
    const { name, token } = await newToken("free");
    const { data, response } = await anthropic({ apiKey: token }).messages.create(request).withResponse();
    expect(data.usage.output_tokens).toBe(3);
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("15");
    const bearer = await anthropic({ apiKey: null, authToken: token }).messages.create(request);
    expect(bearer.usage.output_tokens).toBe(3);
    const streamed = await anthropic({ apiKey: token }).messages.stream(request).finalMessage();
    expect(streamed.usage.output_tokens).toBe(3);
    const row = await ledgerRow(name, 3);
    expect(row).toMatchObject({ requests: 3, completionTokens: 9 });
    // count_tokens after the ledger is read: it is a request too (one that uses no tokens).
    expect((await anthropic({ apiKey: token }).messages.countTokens(request)).input_tokens).toBe(data.usage.input_tokens);
    expect(await ledgerRow(name, 4)).toMatchObject({ requests: 4, promptTokens: row!.promptTokens, completionTokens: 9 });
  });

  it("counts count_tokens as a request that uses no tokens, as tokenize: limited, and in the ledger", async () => {
    const { name, token } = await newToken("single");
    const client = anthropic({ apiKey: token });
    const { data, response } = await client.messages.countTokens(request).withResponse();
    expect(data.input_tokens).toBeGreaterThan(0);
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("1");
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const refused = await postJson(`${server.url}/v1/messages/count_tokens`, request, {
      headers: { "content-type": "application/json", "x-api-key": token },
    });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await refused.json()).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: expect.stringMatching(/request/i) },
      request_id: refused.headers.get("request-id"),
    });
    await expect(client.messages.countTokens(request)).rejects.toBeInstanceOf(Anthropic.RateLimitError);
    // The one it served is in the ledger, with no tokens; the refused ones are not.
    expect(await ledgerRow(name, 1)).toMatchObject({ requests: 1, promptTokens: 0, completionTokens: 0 });
    // And it shares the tier's request limit with generation.
    await expect(client.messages.create(request)).rejects.toBeInstanceOf(Anthropic.RateLimitError);
  });

  it("refuses a missing, wrong or ambiguous credential with 401 authentication_error", async () => {
    const { token } = await newToken("free");
    const other = (await newToken("free")).token;
    const expect401 = async (headers: Record<string, string>, message: RegExp) => {
      const response = await postJson(`${server.url}/v1/messages`, request, {
        headers: { "content-type": "application/json", ...headers },
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toEqual({
        type: "error",
        error: { type: "authentication_error", message: expect.stringMatching(message) },
        request_id: response.headers.get("request-id"),
      });
    };
    await expect401({}, /x-api-key/);
    await expect401({ "x-api-key": "mh_not-a-token" }, /Invalid API key/);
    await expect401(
      { "x-api-key": token, authorization: `Bearer ${other}` },
      /both an Authorization and an x-api-key header with different credentials/,
    );
    await expect(anthropic({ apiKey: "wrong" }).messages.create(request)).rejects.toBeInstanceOf(Anthropic.AuthenticationError);
    // Two x-api-key headers (which fetch would merge) could name two callers: refused whatever they hold.
    const twice = await rawRequest(server.url, {
      method: "POST",
      target: "/v1/messages",
      headers: [
        ["x-api-key", token],
        ["x-api-key", token],
      ],
      body: JSON.stringify(request),
    });
    expect(twice.status).toBe(401);
    expect(JSON.parse(twice.body)).toEqual({
      type: "error",
      error: { type: "authentication_error", message: expect.stringMatching(/more than one x-api-key header/) },
      request_id: twice.headers["request-id"],
    });
    // The same token in both headers is one credential.
    const both = await postJson(`${server.url}/v1/messages`, request, {
      headers: { "content-type": "application/json", "x-api-key": token, authorization: `Bearer ${token}` },
    });
    expect(both.status).toBe(200);
  });

  it("answers a rate-limited request with 429 rate_limit_error and Retry-After, streamed or not", async () => {
    const { token } = await newToken("single");
    const client = anthropic({ apiKey: token });
    await client.messages.create(request);
    const refused = await postJson(
      `${server.url}/v1/messages`,
      { ...request, stream: true },
      { headers: { "content-type": "application/json", "x-api-key": token } },
    );
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await refused.json()).toEqual({
      type: "error",
      error: { type: "rate_limit_error", message: expect.stringMatching(/request/i) },
      request_id: refused.headers.get("request-id"),
    });
    await expect(client.messages.create(request)).rejects.toBeInstanceOf(Anthropic.RateLimitError);
  });

  it("answers a prompt over the tier's per-request cap with 413 request_too_large", async () => {
    const { token } = await newToken("capped");
    const response = await postJson(`${server.url}/v1/messages`, request, {
      headers: { "content-type": "application/json", "x-api-key": token },
    });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({
      type: "error",
      error: { type: "request_too_large", message: expect.stringMatching(/allows 5 per request/) },
      request_id: response.headers.get("request-id"),
    });
  });
});
