import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateToken } from "../../src/access/tokenFormat.js";
import { needs } from "../support/debianPackages.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startRedis, type RunningRedis } from "../support/startRedis.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

const tiers = {
  default: "free",
  tiers: {
    free: { requestsPerMinute: 15, tokensPerDay: 150_000 },
    budget: { requestsPerMinute: 1000, tokensPerDay: 1000 },
    capped: { requestsPerMinute: 1000, maxInputTokens: 20, maxOutputTokens: 5 },
  },
};

const messages = [{ role: "user" as const, content: "Hello there." }];
/** What these tests check is the gate's, not the model's: a fake engine, writing a long reply at a token a millisecond. */
const engine = () => new FakeEngine({ models: ["tiny"], reply: { text: "word ".repeat(2000), tokenMs: 1 } });

describe("hosted profile over HTTP", () => {
  let hosted: Hosted;
  let server: TestServer;
  const logs: string[] = [];
  /** Every token handed out, for the log check. */
  const issued: string[] = [];

  const client = (token: string) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey: token, maxRetries: 0 });
  const chat = (token: string, body: object = {}) =>
    postJson(
      `${server.url}/v1/chat/completions`,
      { model: "tiny", messages, max_tokens: 2, ...body },
      { headers: { "content-type": "application/json", authorization: `Bearer ${token}` } },
    );
  /** A new account of the tier, and a token for it: each test counts against limits of its own. */
  const newAccount = async (tier: keyof typeof tiers.tiers) => {
    const account = await hosted.newAccount(tier);
    issued.push(account.token);
    return account;
  };
  const tokensUsed = async (account: string) =>
    (await hosted.accounts.usage({ account })).reduce((sum, row) => sum + row.promptTokens + row.completionTokens, 0);

  beforeAll(async () => {
    hosted = await openHosted({ tiers });
    server = await hosted.serve({
      engine: engine(),
      config: { logLevel: "info", parallel: 4, maxQueue: 256 },
      logDestination: { write: (line) => void logs.push(line) },
    });
  });
  afterAll(async () => {
    await hosted?.close();
  });

  it("serves a valid token through the official client, with rate-limit headers", async () => {
    const { token } = await newAccount("free");
    const { data, response } = await client(token).chat.completions.create({ model: "tiny", messages, max_tokens: 2 }).withResponse();
    expect(data.choices[0]?.message.content).toBeTypeOf("string");
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("15");
    expect(Number(response.headers.get("x-ratelimit-remaining-requests"))).toBe(14);
    expect(response.headers.get("x-ratelimit-reset-requests")).toMatch(/^\d+(m\d+)?s$/);
    expect(response.headers.get("x-ratelimit-limit-tokens")).toBe("150000");
    expect(Number(response.headers.get("x-ratelimit-remaining-tokens"))).toBeLessThan(150_000);
    // Even responses that consume nothing carry them.
    const models = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } });
    expect(models.status).toBe(200);
    expect(models.headers.get("x-ratelimit-limit-requests")).toBe("15");
  });

  it("sets the headers before a stream's first byte", async () => {
    const { token } = await newAccount("free");
    const response = await chat(token, { stream: true });
    expect(response.headers.get("content-type")).toMatch(/text\/event-stream/);
    expect(response.headers.get("x-ratelimit-remaining-requests")).not.toBeNull();
    await response.text();
  });

  it("refuses every kind of bad credential with the same 401, never echoing it", async () => {
    const { name, token } = await newAccount("free");
    const revoked = await hosted.accounts.createToken(name, { name: "revoked" });
    await hosted.accounts.revokeToken(revoked.token.id);
    const expired = generateToken();
    const account = await hosted.store.findAccount(name);
    await hosted.store.createToken({
      accountId: account!.id,
      name: "old",
      prefix: expired.prefix,
      hash: expired.hash,
      expiresAt: Date.now() - 1000,
    });
    const mallory = await newAccount("free");
    await hosted.accounts.disableAccount(mallory.name);
    const disabled = mallory.token;
    const typo = token.slice(0, -1) + (token.endsWith("A") ? "B" : "A");
    const cases: Array<[string, Record<string, string>]> = [
      ["missing", {}],
      ["not bearer", { authorization: `Basic ${token}` }],
      ["malformed", { authorization: "Bearer sk-not-ours" }],
      ["checksum typo", { authorization: `Bearer ${typo}` }],
      ["unknown", { authorization: `Bearer ${generateToken().token}` }],
      ["revoked", { authorization: `Bearer ${revoked.secret}` }],
      ["expired", { authorization: `Bearer ${expired.token}` }],
      ["disabled account", { authorization: `Bearer ${disabled}` }],
    ];
    for (const [what, headers] of cases) {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ model: "tiny", messages }),
      });
      expect(response.status, what).toBe(401);
      const text = await response.text();
      expect(JSON.parse(text)).toMatchObject({ error: { type: "invalid_request_error", code: "invalid_api_key", param: null } });
      for (const secret of [token, typo, revoked.secret, disabled, expired.token]) expect(text).not.toContain(secret.slice(3));
    }
    const viaClient = await client("mh_wrong")
      .models.list()
      .catch((error: unknown) => error);
    expect(viaClient).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it("admits exactly 15 of 100 simultaneous requests within a minute", async () => {
    const { token } = await newAccount("free");
    const responses = await Promise.all(Array.from({ length: 100 }, () => chat(token, { max_tokens: 1 })));
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(15);
    expect(statuses.filter((status) => status === 429)).toHaveLength(85);
    const refused = responses.find((response) => response.status === 429)!;
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const body = (await refused.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("rate_limit_exceeded");
    expect(body.error.type).toBe("requests");
    expect(body.error.message).toMatch(/requests per minute.*wait one minute/i);
    await Promise.all(responses.map((response) => response.text().catch(() => "")));
  });

  it("raises RateLimitError in the official client, with the headers", async () => {
    const { token } = await newAccount("free");
    // The minute's 15 requests, used up here.
    for (let i = 0; i < 15; i++) expect((await chat(token, { max_tokens: 1 })).status).toBe(200);
    const error = await client(token)
      .chat.completions.create({ model: "tiny", messages, max_tokens: 1 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    const headers = (error as InstanceType<typeof OpenAI.RateLimitError>).headers;
    expect(headers?.get("retry-after")).toMatch(/^\d+$/);
    expect(headers?.get("x-ratelimit-limit-requests")).toBe("15");
  });

  it("never exceeds the day's token budget under 20 concurrent streams, and settles to real usage", async () => {
    const { name, token } = await newAccount("budget");
    // 1000 tokens a day: each stream reserves its prompt + 100; only some fit at once.
    const streams = await Promise.all(
      Array.from({ length: 20 }, () => chat(token, { max_tokens: 100, stream: true, stream_options: { include_usage: true } })),
    );
    const admitted = streams.filter((response) => response.status === 200);
    const refused = streams.filter((response) => response.status === 429);
    expect(admitted.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    let used = 0;
    for (const response of admitted) {
      const text = await response.text();
      const usage = text
        .split("\n\n")
        .map((event) => event.replace(/^data: /, ""))
        .filter((event) => event.includes('"usage":{'))
        .map((event) => JSON.parse(event) as { usage: { total_tokens: number } });
      used += usage.at(-1)!.usage.total_tokens;
    }
    for (const response of refused) {
      const body = (await response.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("tokens");
      expect(body.error.message).toMatch(/tokens per day/);
    }
    expect(used).toBeLessThanOrEqual(1000);
    // The ledger holds exactly what was used, once every request has settled.
    await expect.poll(() => tokensUsed(name)).toBe(used);
    const usage = await (await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } })).json();
    expect(usage).toMatchObject({
      object: "usage",
      account: { name, tier: "budget" },
      limits: { tokens_per_day: { limit: 1000, remaining: 1000 - used } },
    });
  });

  it("reserves n × max_tokens for n choices, and charges the prompt once and every choice's tokens", async () => {
    const { name, token } = await newAccount("budget");
    // 1000 tokens a day: one choice of 300 fits, four do not.
    const four = await chat(token, { max_tokens: 300, n: 4 });
    expect(four.status).toBe(429);
    expect(((await four.json()) as { error: { type: string } }).error.type).toBe("tokens");
    expect(await tokensUsed(name)).toBe(0);
    const reply = await client(token).chat.completions.create({ model: "tiny", messages, max_tokens: 50, n: 4, temperature: 0 });
    expect(reply.choices).toHaveLength(4);
    expect(reply.usage!.completion_tokens).toBe(reply.choices.length * 50);
    await expect.poll(() => tokensUsed(name)).toBe(reply.usage!.total_tokens);
  });

  it("charges an aborted stream what it generated", async () => {
    const { name, token } = await newAccount("free");
    const completionTokens = async () =>
      (await hosted.accounts.usage({ account: name })).reduce((sum, row) => sum + row.completionTokens, 0);
    const before = await completionTokens();
    const controller = new AbortController();
    const stream = await client(token).chat.completions.create(
      { model: "tiny", messages, max_tokens: 5000, stream: true, temperature: 0 },
      { signal: controller.signal },
    );
    let received = 0;
    let finishReason: string | null | undefined;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content !== undefined) received++;
      finishReason ??= chunk.choices[0]?.finish_reason;
      if (received === 20) controller.abort();
    }
    // The client's own signal ended the stream (the client ends its iteration quietly then), not the server.
    expect(controller.signal.aborted).toBe(true);
    expect(finishReason ?? null).toBeNull();
    expect(received).toBeGreaterThanOrEqual(20);
    await expect.poll(async () => (await completionTokens()) - before, { timeout: 5000 }).toBeGreaterThanOrEqual(19);
    const charged = (await completionTokens()) - before;
    expect(charged).toBeLessThan(5000);
  });

  it("answers 413 for a prompt over the tier's per-request cap, and caps max_tokens", async () => {
    const { token } = await newAccount("capped");
    const long = await chat(token, { messages: [{ role: "user", content: "word ".repeat(100) }] });
    expect(long.status).toBe(413);
    expect(((await long.json()) as { error: { code: string } }).error.code).toBe("tokens_limit_reached");
    const capped = await client(token).chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 50,
    });
    expect(capped.usage?.completion_tokens).toBe(5);
    expect(capped.choices[0]?.finish_reason).toBe("length");
  });

  it("keeps tokens and Authorization headers out of the logs", async () => {
    const { token } = await newAccount("free");
    const start = logs.length;
    // Logged requests of every kind: admitted, streamed, refused as unauthenticated, consuming nothing.
    expect((await chat(token)).status).toBe(200);
    expect((await chat(token, { max_tokens: 1 })).status).toBe(200);
    await (await chat(token, { stream: true })).text();
    expect((await chat(token.slice(0, -1))).status).toBe(401);
    expect((await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect((await fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    await expect.poll(() => logs.length - start).toBeGreaterThan(10);
    const all = logs.join("\n");
    for (const secret of issued) {
      expect(all).not.toContain(secret);
      expect(all).not.toContain(secret.slice(10)); // the secret part, without the display prefix
    }
    expect(all).not.toMatch(/authorization/i);
  });
});

describe.skipIf(!needs("redis-server"))("hosted profile with its rate limiter in Redis, when Redis goes down", () => {
  let hosted: Hosted;
  let redis: RunningRedis;
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    redis = await startRedis();
    hosted = await openHosted();
    token = (await hosted.newAccount()).token;
    server = await hosted.serve({ engine: engine(), config: { redisUrl: redis.url } });
  });
  afterAll(async () => {
    await hosted?.close();
    await redis?.stop();
  });

  it("answers GET /v1/usage and chat with 503 limiter_unavailable, never a 500", async () => {
    const usage = () => fetch(`${server.url}/v1/usage`, { headers: { authorization: `Bearer ${token}` } });
    expect((await usage()).status).toBe(200);
    await redis.kill();
    for (const response of [
      await usage(),
      await postJson(
        `${server.url}/v1/chat/completions`,
        { model: "tiny", messages, max_tokens: 1 },
        { headers: { "content-type": "application/json", authorization: `Bearer ${token}` } },
      ),
    ]) {
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("1");
      expect(await response.json()).toMatchObject({ error: { code: "limiter_unavailable", type: "server_error" } });
    }
  });
});
