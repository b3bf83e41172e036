// Issue 15 in the hosted profile: rerank and the tokenizer endpoints count against the caller's
// tier (their own groups @rerank and @tokenize) and go into the usage ledger. The gate's work, not
// the models': a fake engine, with a chat model and a reranking one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

const tiers = {
  default: "free",
  tiers: {
    free: { requestsPerMinute: 1000, tokensPerDay: 100_000 },
    grouped: { requestsPerMinute: 1000, models: { "@rerank": { requestsPerMinute: 1 }, "@tokenize": { requestsPerMinute: 2 } } },
    capped: { requestsPerMinute: 1000, maxInputTokens: 20 },
  },
};

const rerankBody = { model: "rerank", query: "where is the library", documents: ["the library opens at nine", "a dog plays by the sea"] };

describe("hosted profile: rerank and the tokenizer", () => {
  let hosted: Hosted;
  let server: TestServer;

  const newAccount = (tier: keyof typeof tiers.tiers) => hosted.newAccount(tier);
  const post = (token: string, route: string, body: object) =>
    postJson(`${server.url}${route}`, body, { headers: { "content-type": "application/json", authorization: `Bearer ${token}` } });
  const ledger = async (account: string) => {
    const rows = await hosted.accounts.usage({ account });
    return {
      requests: rows.reduce((sum, row) => sum + row.requests, 0),
      tokens: rows.reduce((sum, row) => sum + row.promptTokens + row.completionTokens, 0),
    };
  };

  beforeAll(async () => {
    hosted = await openHosted({ tiers });
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny", { id: "rerank", capabilities: ["rerank"] }] }) });
  });
  afterAll(async () => {
    await hosted?.close();
  });

  it("refuses rerank and tokenizer requests without a token", async () => {
    for (const [route, body] of [
      ["/v1/rerank", rerankBody],
      ["/tokenize", { model: "tiny", content: "hi" }],
      ["/detokenize", { model: "tiny", tokens: [1] }],
    ] as const) {
      const response = await postJson(`${server.url}${route}`, body);
      expect(response.status, route).toBe(401);
    }
  });

  it("records a rerank's evaluated tokens in the ledger, as its usage says, with rate-limit headers", async () => {
    const { name, token } = await newAccount("free");
    const response = await post(token, "/v1/rerank", rerankBody);
    expect(response.status).toBe(200);
    expect(response.headers.get("x-ratelimit-limit-tokens")).toBe("100000");
    const { usage } = (await response.json()) as { usage: { total_tokens: number } };
    expect(usage.total_tokens).toBeGreaterThan(0);
    await expect.poll(() => ledger(name)).toEqual({ requests: 1, tokens: usage.total_tokens });
  });

  it("counts tokenizer requests as requests that use no tokens", async () => {
    const { name, token } = await newAccount("free");
    expect((await post(token, "/tokenize", { model: "tiny", content: "hello there" })).status).toBe(200);
    expect((await post(token, "/detokenize", { model: "tiny", tokens: [1, 2] })).status).toBe(200);
    await expect.poll(() => ledger(name)).toEqual({ requests: 2, tokens: 0 });
  });

  it("holds rerank and the tokenizer to their groups' own limits, apart from chat", async () => {
    const { token } = await newAccount("grouped");
    expect((await post(token, "/v1/rerank", rerankBody)).status).toBe(200);
    const refused = await post(token, "/rerank", rerankBody);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
    for (let i = 0; i < 2; i++) expect((await post(token, "/tokenize", { model: "tiny", content: "hi" })).status).toBe(200);
    expect((await post(token, "/v1/tokenize", { model: "tiny", content: "hi" })).status).toBe(429);
    // Chat has its own counters (the tier's), untouched by the groups.
    expect(
      (await post(token, "/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 1 })).status,
    ).toBe(200);
  });

  it("refuses a rerank whose inputs exceed the tier's maxInputTokens with a 413", async () => {
    const { name, token } = await newAccount("capped");
    const response = await post(token, "/v1/rerank", {
      ...rerankBody,
      documents: ["the library opens at nine and closes at six in the evening", "a dog"],
    });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("tokens_limit_reached");
    expect(await ledger(name)).toEqual({ requests: 0, tokens: 0 });
  });
});
