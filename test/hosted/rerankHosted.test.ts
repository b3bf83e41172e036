// Issue 15 in the hosted profile: rerank and the tokenizer endpoints count against the caller's
// tier (their own groups @rerank and @tokenize) and go into the usage ledger.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccessService } from "../../src/access/AccessService.js";
import { SqliteAccessStore } from "../../src/access/SqliteAccessStore.js";
import { loadTiers } from "../../src/access/tiers.js";
import { DATABASE_FILE } from "../../src/cli/openAccess.js";
import { postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

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
  let dataDir: string;
  let server: TestServer;
  let service: AccessService;
  let store: SqliteAccessStore;
  let accounts = 0;

  const newAccount = async (tier: keyof typeof tiers.tiers) => {
    const name = `${tier}-${++accounts}`;
    await service.createAccount(name, tier);
    return { name, token: (await service.createToken(name, { name: "test" })).secret };
  };
  const post = (token: string, route: string, body: object) =>
    postJson(`${server.url}${route}`, body, { headers: { "content-type": "application/json", authorization: `Bearer ${token}` } });
  const ledger = async (account: string) => {
    const rows = await service.usage({ account });
    return {
      requests: rows.reduce((sum, row) => sum + row.requests, 0),
      tokens: rows.reduce((sum, row) => sum + row.promptTokens + row.completionTokens, 0),
    };
  };

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-rerank-hosted-"));
    const tiersFile = path.join(dataDir, "tiers.json");
    await writeFile(tiersFile, JSON.stringify(tiers));
    store = SqliteAccessStore.open(path.join(dataDir, DATABASE_FILE));
    service = new AccessService(store, await loadTiers(tiersFile));
    server = await startTestServer({
      models: { tiny: await testModelPath("tiny"), rerank: await testModelPath("rerank-tiny") },
      config: { profile: "hosted", dataDir, tiersFile },
    });
  });
  afterAll(async () => {
    await server?.close();
    await store?.close();
    await rm(dataDir, { recursive: true, force: true });
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
