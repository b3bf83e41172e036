// Issue 14, Responses API in the hosted profile, on both stores (SQLite in the data directory, and
// PostgreSQL with --database-url): a stored response is its account's, invisible to every other;
// the caller's tier limits and the usage ledger apply as to chat completions; stored responses
// expire.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openResponseStore } from "../../src/cli/openAccess.js";
import type { ResponseStore } from "../../src/storedResponses/ResponseStore.js";
import { needs } from "../support/debianPackages.js";
import { FakeEngine } from "../support/fakeEngine.js";
import { openHosted, type Hosted } from "../support/hostedServer.js";
import { startPostgres, type TestPostgres } from "../support/startPostgres.js";
import { postJson, type TestServer } from "../support/startTestServer.js";

const tiers = {
  default: "free",
  tiers: {
    free: { requestsPerMinute: 1000, tokensPerDay: 1_000_000 },
    capped: { requestsPerMinute: 1000, maxOutputTokens: 5 },
    slow: { requestsPerMinute: 2 },
  },
};

interface Backend {
  name: string;
  available: boolean;
  /** The database URL of the server's stores ("": SQLite in its data directory). */
  start(): Promise<string>;
}

let postgres: TestPostgres | undefined;

const backends: Backend[] = [
  { name: "SQLite", available: true, start: async () => "" },
  {
    name: "PostgreSQL",
    available: needs("postgresql"),
    async start() {
      postgres = await startPostgres();
      return postgres.url;
    },
  },
];

// The gate's and the stores' work, not the model's: a fake engine, with a long reply for the output caps.
describe.each(backends)("Responses API, hosted profile on $name", (backend) => {
  let hosted: Hosted;
  let server: TestServer;
  /** The response store the server uses, opened on the test's side too. */
  let responses: ResponseStore;

  const newAccount = async (tier: keyof typeof tiers.tiers) => {
    const account = await hosted.newAccount(tier);
    return { ...account, client: new OpenAI({ baseURL: `${server.url}/v1`, apiKey: account.token, maxRetries: 0 }) };
  };
  const tokensUsed = async (account: string) =>
    (await hosted.accounts.usage({ account })).reduce((sum, row) => sum + row.promptTokens + row.completionTokens, 0);

  beforeAll(async () => {
    if (!backend.available) return;
    hosted = await openHosted({ tiers, databaseUrl: await backend.start() });
    responses = await openResponseStore({ profile: "hosted", dataDir: hosted.dataDir, databaseUrl: hosted.databaseUrl });
    server = await hosted.serve({ engine: new FakeEngine({ models: ["tiny"], reply: { text: "word ".repeat(200) } }) });
  });
  afterAll(async () => {
    await hosted?.close();
    await responses?.close();
    await postgres?.stop();
  });

  it.skipIf(!backend.available)(
    "keeps a stored response its account's: another account gets 404 on every route, and cannot continue it",
    async () => {
      const alice = await newAccount("free");
      const bob = await newAccount("free");
      const response = await alice.client.responses.create({ model: "tiny", input: "A secret.", max_output_tokens: 3 });
      // Stored in the configured backend, under the account.
      expect((await responses.find(response.id, alice.id, Date.now()))?.id).toBe(response.id);
      expect(await responses.find(response.id, bob.id, Date.now())).toBeUndefined();

      expect((await alice.client.responses.retrieve(response.id)).id).toBe(response.id);
      expect((await alice.client.responses.inputItems.list(response.id)).data).toHaveLength(1);
      const notFound = {
        error: { message: `Response with id '${response.id}' not found.`, type: "invalid_request_error", param: null, code: "not_found" },
      };
      for (const [method, suffix] of [
        ["GET", ""],
        ["GET", "/input_items"],
        ["DELETE", ""],
      ] as const) {
        const reply = await fetch(`${server.url}/v1/responses/${response.id}${suffix}`, {
          method,
          headers: { authorization: `Bearer ${bob.token}` },
        });
        expect([method, suffix, reply.status]).toEqual([method, suffix, 404]);
        expect(await reply.json()).toEqual(notFound);
      }
      await expect(
        bob.client.responses.create({ model: "tiny", input: "Go on.", previous_response_id: response.id }),
      ).rejects.toMatchObject({
        status: 400,
        error: { param: "previous_response_id" },
      });
      // Without a token: 401, as every caller route.
      expect((await fetch(`${server.url}/v1/responses/${response.id}`)).status).toBe(401);
      // Bob's delete deleted nothing; Alice continues, then deletes.
      const next = await alice.client.responses.create({
        model: "tiny",
        input: "Go on.",
        previous_response_id: response.id,
        max_output_tokens: 2,
      });
      expect(next.previous_response_id).toBe(response.id);
      await alice.client.responses.delete(response.id);
      await expect(alice.client.responses.retrieve(response.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    },
  );

  it.skipIf(!backend.available)(
    "resolves item references against the caller's own stored items only: another account's are unknown to it",
    async () => {
      const alice = await newAccount("free");
      const bob = await newAccount("free");
      const response = await alice.client.responses.create({ model: "tiny", input: "A secret.", max_output_tokens: 3 });
      const [question] = (await alice.client.responses.inputItems.list(response.id)).data;
      const ids = [question!.id, response.output[0]!.id!];
      const references = ids.map((id) => ({ type: "item_reference" as const, id }));
      for (const id of ids) {
        await expect(
          bob.client.responses.create({
            model: "tiny",
            input: [
              { type: "item_reference", id },
              { role: "user", content: "Go on." },
            ],
          }),
        ).rejects.toMatchObject({
          status: 400,
          error: {
            type: "invalid_request_error",
            param: "input",
            code: null,
            message: expect.stringContaining(`Item with id '${id}' not found.`),
          },
        });
      }
      // Alice's own references resolve, through any of her tokens.
      const secondToken = new OpenAI({
        baseURL: `${server.url}/v1`,
        apiKey: (await hosted.accounts.createToken(alice.name, { name: "second" })).secret,
        maxRetries: 0,
      });
      const next = await secondToken.responses.create({
        model: "tiny",
        input: [...references, { role: "user", content: "Go on." }],
        max_output_tokens: 2,
      });
      expect((await secondToken.responses.inputItems.list(next.id, { order: "asc" })).data.slice(0, 2).map((item) => item.id)).toEqual(ids);
    },
  );

  it.skipIf(!backend.available)(
    "finds stored items by id, its owner's only, until they expire or their response is deleted (the store, with explicit times)",
    async () => {
      const item = (id: string, text: string) => ({ id, item: { id, type: "message", text } });
      const base = { owner: "acct_items", response: { id: "x" }, input: [] };
      await responses.save({ ...base, id: "resp_items_1", createdAt: 1_000, expiresAt: 5_000 }, [
        item("msg_a", "first"),
        item("msg_b", "b"),
        item("msg_a", "duplicate"),
      ]);
      await responses.save({ ...base, id: "resp_items_2", createdAt: 2_000, expiresAt: 3_000 }, [
        item("msg_a", "later"),
        item("msg_c", "c"),
      ]);
      await responses.save({ ...base, owner: null, id: "resp_items_local", createdAt: 1_000, expiresAt: 5_000 }, [item("msg_d", "d")]);
      const found = (ids: string[], owner: string | null, now: number) =>
        responses
          .findItems(ids, owner, now)
          .then((map) => Object.fromEntries([...map].map(([id, value]) => [id, (value as { text: string }).text])));
      // The latest response's copy of an id wins; one response's duplicate id keeps its first.
      expect(await found(["msg_a", "msg_b", "msg_c", "msg_d", "msg_none"], "acct_items", 2_500)).toEqual({
        msg_a: "later",
        msg_b: "b",
        msg_c: "c",
      });
      expect(await found(["msg_a", "msg_c"], "acct_items", 3_000)).toEqual({ msg_a: "first" });
      expect(await found(["msg_a", "msg_d"], null, 2_500)).toEqual({ msg_d: "d" });
      expect(await found(["msg_a"], "acct_other", 2_500)).toEqual({});
      expect(await found([], "acct_items", 2_500)).toEqual({});
      expect(await responses.delete("resp_items_1", "acct_items", 2_500)).toBe(true);
      expect(await found(["msg_a", "msg_b"], "acct_items", 2_500)).toEqual({ msg_a: "later" });
      await responses.deleteExpired(3_000);
      expect(await found(["msg_a", "msg_c"], "acct_items", 1_500)).toEqual({});
      expect(await found(["msg_d"], null, 1_500)).toEqual({ msg_d: "d" });
    },
  );

  it.skipIf(!backend.available)("applies the tier's output cap and writes the usage ledger, streamed or not", async () => {
    const capped = await newAccount("capped");
    const plain = await capped.client.responses.create({
      model: "tiny",
      input: "Tell a long story.",
      max_output_tokens: 100,
      store: false,
    });
    expect(plain.status).toBe("incomplete");
    expect(plain.usage?.output_tokens).toBe(5);
    let streamed: OpenAI.Responses.Response | undefined;
    for await (const event of await capped.client.responses.create({
      model: "tiny",
      input: "Tell a long story.",
      stream: true,
      store: false,
    })) {
      if (event.type === "response.incomplete" || event.type === "response.completed") streamed = event.response;
    }
    expect(streamed?.usage?.output_tokens).toBe(5);
    const used = plain.usage!.total_tokens + streamed!.usage!.total_tokens;
    await expect.poll(() => tokensUsed(capped.name), { timeout: 10_000 }).toBe(used);
  });

  it.skipIf(!backend.available)("refuses beyond the tier's rate with 429 in the OpenAI shape, with rate-limit headers", async () => {
    const slow = await newAccount("slow");
    const post = () =>
      postJson(
        `${server.url}/v1/responses`,
        { model: "tiny", input: "Hi.", max_output_tokens: 1 },
        { headers: { "content-type": "application/json", authorization: `Bearer ${slow.token}` } },
      );
    const first = await post();
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("2");
    expect((await post()).status).toBe(200);
    const refused = await post();
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(await refused.json()).toMatchObject({ error: { type: "requests", code: "rate_limit_exceeded", param: null } });
  });

  it.skipIf(!backend.available)("hides and purges expired responses (the store, with explicit times)", async () => {
    const base = { owner: "acct_expiry", response: { id: "x" }, input: [{ id: "msg_1" }] };
    await responses.save({ ...base, id: "resp_expiry_old", createdAt: 1_000, expiresAt: 2_000 });
    await responses.save({ ...base, id: "resp_expiry_new", createdAt: 1_000, expiresAt: 5_000 });
    expect(await responses.find("resp_expiry_old", "acct_expiry", 1_999)).toMatchObject({
      id: "resp_expiry_old",
      createdAt: 1_000,
      expiresAt: 2_000,
      input: [{ id: "msg_1" }],
    });
    expect(await responses.find("resp_expiry_old", "acct_expiry", 2_000)).toBeUndefined();
    expect(await responses.delete("resp_expiry_old", "acct_expiry", 2_000)).toBe(false);
    expect(await responses.deleteExpired(3_000)).toBe(1);
    expect(await responses.find("resp_expiry_old", "acct_expiry", 1_500)).toBeUndefined();
    expect(await responses.find("resp_expiry_new", "acct_expiry", 3_000)).toBeDefined();
    // An unowned response (the local profile's) is not an owner's, nor the reverse.
    await responses.save({ ...base, owner: null, id: "resp_local", createdAt: 1_000, expiresAt: 5_000 });
    expect(await responses.find("resp_local", null, 3_000)).toBeDefined();
    expect(await responses.find("resp_local", "acct_expiry", 3_000)).toBeUndefined();
    expect(await responses.find("resp_expiry_new", null, 3_000)).toBeUndefined();
  });
});
