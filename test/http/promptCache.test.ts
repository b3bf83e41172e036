import type OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Config } from "../../src/config/settings.js";
import type { EngineCounters } from "../../src/core/ModelInfo.js";
import { startTestServer, type TestServer } from "../support/startTestServer.js";
import { testModelPath } from "../support/testModels.js";

type Message = OpenAI.ChatCompletionMessageParam;

/** A user message of about `words` tokens, its words numbered after `topic` so conversations differ from the start. */
function userMessage(topic: string, words: number): Message {
  return { role: "user", content: Array.from({ length: words }, (_, i) => `${topic}${i}`).join(" ") };
}

/** One sequence (so each new conversation evicts the last), on the tiny model. */
async function oneSlotServer(config: Partial<Config>): Promise<TestServer> {
  return startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { parallel: 1, ...config } });
}

/** A long reply at temperature 0: how it ended, and its tokens. */
async function longReply(server: TestServer): Promise<{ finish: string; tokens: number }> {
  const completion = await server.client.chat.completions.create({
    model: "tiny",
    messages: [userMessage("river", 40)],
    max_tokens: 3000,
    temperature: 0,
  });
  return { finish: completion.choices[0]!.finish_reason, tokens: completion.usage!.completion_tokens };
}

async function health(server: TestServer): Promise<{ counters: EngineCounters; promptCacheBytes: number }> {
  return (await (await fetch(`${server.url}/health`)).json()) as { counters: EngineCounters; promptCacheBytes: number };
}

/** One turn at temperature 0: the reply appended to the conversation, and what it reported. */
async function turn(server: TestServer, conversation: Message[]): Promise<{ promptTokens: number; cachedTokens: number; reply: string }> {
  const completion = await server.client.chat.completions.create({ model: "tiny", messages: conversation, max_tokens: 12, temperature: 0 });
  const reply = completion.choices[0]!.message.content ?? "";
  conversation.push({ role: "assistant", content: reply });
  return {
    promptTokens: completion.usage!.prompt_tokens,
    cachedTokens: completion.usage!.prompt_tokens_details?.cached_tokens ?? 0,
    reply,
  };
}

function metric(text: string, name: string): number {
  const line = text.split("\n").find((each) => each.startsWith(`${name} `));
  return Number(line?.split(" ")[1]);
}

/**
 * Conversation A, then B on the one sequence (A's state goes to host memory), then A's second
 * turn: what it reports, its reply, and the server's counters and metrics after.
 */
async function comeBack(server: TestServer) {
  const a: Message[] = [userMessage("lighthouse", 120)];
  const b: Message[] = [userMessage("harbour", 120)];
  const first = await turn(server, a);
  await turn(server, b);
  a.push(userMessage("keeper", 20));
  const second = await turn(server, a);
  const metrics = await (await fetch(`${server.url}/metrics`)).text();
  return { first, second, health: await health(server), metrics };
}

describe("prompt cache beyond the slots (--cache-ram)", () => {
  let cached: TestServer;
  let uncached: TestServer;
  beforeAll(async () => {
    [cached, uncached] = await Promise.all([oneSlotServer({}), oneSlotServer({ cacheRam: 0 })]);
  });
  afterAll(async () => {
    await Promise.all([cached?.close(), uncached?.close()]);
  });

  it("restores a conversation evicted from its sequence when it comes back, and replies as if it had been decoded afresh", async () => {
    const withCache = await comeBack(cached);
    const withoutCache = await comeBack(uncached);
    // Everything A's first turn held (its prompt and reply) came back from host memory.
    expect(withCache.second.cachedTokens).toBeGreaterThanOrEqual(withCache.first.promptTokens);
    expect(withCache.health.counters.promptTokensRestored).toBeGreaterThanOrEqual(withCache.first.promptTokens);
    expect(metric(withCache.metrics, "modelhost_prompt_cache_restored_tokens_total")).toBe(withCache.health.counters.promptTokensRestored);
    // A and B are saved (each when the other took the sequence): about 270 bytes a token on this model.
    expect(withCache.health.promptCacheBytes).toBeGreaterThan(0);
    expect(metric(withCache.metrics, "modelhost_prompt_cache_bytes")).toBe(withCache.health.promptCacheBytes);
    // Restored state gives the same reply at temperature 0 as the prompt decoded from nothing.
    expect(withCache.second.reply).toBe(withoutCache.second.reply);
    expect(withCache.first.reply).toBe(withoutCache.first.reply);
  });

  it("saves a conversation that keeps half its sequence, a shared system prompt, when another takes it, and restores its own turns", async () => {
    // Both share a long system prompt: B keeps it (more than half of what A's sequence holds) and drops A's own turn.
    const system: Message = { role: "system", content: Array.from({ length: 100 }, (_, i) => `rule${i}`).join(" ") };
    const a: Message[] = [system, userMessage("ledger", 40)];
    const first = await turn(cached, a);
    await turn(cached, [system, userMessage("atlas", 40)]);
    a.push(userMessage("keeper", 20));
    const second = await turn(cached, a);
    // Its own turn and reply came back, not only the system prompt it shares with B.
    expect(second.cachedTokens).toBeGreaterThanOrEqual(first.promptTokens);
  });

  it("keeps one state a conversation: a later save that holds all of an entry but a short tail replaces it", async () => {
    const bytes = async () => (await health(cached)).promptCacheBytes;
    const a: Message[] = [userMessage("compass", 60)];
    const b: Message[] = [userMessage("anchor", 60)];
    await turn(cached, a);
    const before = await bytes();
    await turn(cached, b); // saves A's first turn
    const firstA = (await bytes()) - before;
    // The client sends back another text than the reply (trimmed, thoughts left out, …): A's next
    // state holds the first one but for its reply.
    a[a.length - 1] = { role: "assistant", content: "Noted." };
    a.push(userMessage("keeper", 20));
    await turn(cached, a); // saves B, restores A
    const withB = await bytes();
    b.push(userMessage("sailor", 20));
    await turn(cached, b); // saves A's second turn; its first goes
    // Without the replacement both of A's states would stay: growth by the whole second one, more than the first.
    expect((await bytes()) - withB).toBeLessThan(firstA);
  });

  it("moves a state out once its conversation is back in a sequence: host memory holds only the conversations not in one", async () => {
    const server = await oneSlotServer({});
    try {
      const bytes = async () => (await health(server)).promptCacheBytes;
      const a: Message[] = [userMessage("beacon", 120)];
      const first = await turn(server, a);
      await turn(server, [userMessage("quarry", 120)]); // saves A
      const withA = await bytes();
      a.push(userMessage("keeper", 20));
      const second = await turn(server, a); // saves B, restores all of A
      expect(second.cachedTokens).toBeGreaterThanOrEqual(first.promptTokens);
      // B's state alone (the same length as A's), not A's and B's.
      expect(withA).toBeGreaterThan(0);
      expect(await bytes()).toBeLessThan(1.5 * withA);
    } finally {
      await server.close();
    }
  });

  it("reports what was restored in every format's usage: Messages cache_read_input_tokens, Ollama prompt_eval_cached_count", async () => {
    // A's first turn, then B's (A goes to host memory), then A's second turn in the format checked.
    const evicted = async (topic: string) => {
      const a: Message[] = [userMessage(`${topic}a`, 120)];
      const first = await turn(cached, a);
      await turn(cached, [userMessage(`${topic}b`, 120)]);
      a.push(userMessage("keeper", 20));
      return { first, messages: a.map((m) => ({ role: m.role as "user" | "assistant", content: m.content as string })) };
    };
    const post = async <T>(route: string, body: object): Promise<T> => {
      const response = await fetch(`${cached.url}${route}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as T;
    };

    const anthropic = await evicted("meadow");
    const request = { model: "tiny", max_tokens: 4, temperature: 0, messages: anthropic.messages };
    const { usage } = await post<{ usage: Record<"input_tokens" | "cache_read_input_tokens" | "cache_creation_input_tokens", number> }>(
      "/v1/messages",
      request,
    );
    const { input_tokens: wholePrompt } = await post<{ input_tokens: number }>("/v1/messages/count_tokens", {
      model: "tiny",
      messages: anthropic.messages,
    });
    // As Anthropic and llama-server count: input_tokens is what was not read from the cache, the two add up to the prompt.
    expect(usage.cache_read_input_tokens).toBeGreaterThanOrEqual(anthropic.first.promptTokens);
    expect(usage.input_tokens + usage.cache_read_input_tokens).toBe(wholePrompt);
    expect(usage.cache_creation_input_tokens).toBe(0);

    const ollama = await evicted("quarry");
    const reply = await post<Record<"prompt_eval_count" | "prompt_eval_cached_count", number>>("/api/chat", {
      model: "tiny",
      stream: false,
      messages: ollama.messages,
      options: { num_predict: 4, temperature: 0 },
    });
    // As Ollama counts: prompt_eval_count is the whole prompt, prompt_eval_cached_count the part from the cache.
    expect(reply.prompt_eval_cached_count).toBeGreaterThanOrEqual(ollama.first.promptTokens);
    expect(reply.prompt_eval_cached_count).toBeLessThan(reply.prompt_eval_count);
  });

  it("--cache-ram 0 restores nothing: the returning conversation reuses only the start B shares with it", async () => {
    const { first, second, health, metrics } = await comeBack(uncached);
    expect(second.cachedTokens).toBeLessThan(first.promptTokens / 4);
    expect(health.counters.promptTokensRestored).toBe(0);
    expect(health.promptCacheBytes).toBe(0);
    expect(metric(metrics, "modelhost_prompt_cache_restored_tokens_total")).toBe(0);
  });
});

describe("prompt cache budget", () => {
  let server: TestServer;
  // 1 MiB holds one of these conversations (~2,300 tokens, ~270 bytes a token on the tiny model: ~620 KB) but not two.
  beforeAll(async () => (server = await oneSlotServer({ cacheRam: 1, contextSize: 4096 })));
  afterAll(() => server?.close());

  it("evicts the least recently used state to stay within --cache-ram", async () => {
    const a: Message[] = [userMessage("lighthouse", 300)];
    const b: Message[] = [userMessage("harbour", 300)];
    const c: Message[] = [userMessage("orchard", 300)];
    const firstA = await turn(server, a);
    const firstB = await turn(server, b);
    // C takes the sequence: B is saved, and A, used less recently, makes room for it.
    await turn(server, c);
    b.push(userMessage("sailor", 20));
    const secondB = await turn(server, b);
    a.push(userMessage("keeper", 20));
    const secondA = await turn(server, a);
    expect(secondB.cachedTokens).toBeGreaterThanOrEqual(firstB.promptTokens);
    expect(secondA.cachedTokens).toBeLessThan(firstA.promptTokens / 4);
    const { promptCacheBytes } = await health(server);
    expect(promptCacheBytes).toBeGreaterThan(0);
    expect(promptCacheBytes).toBeLessThanOrEqual(1024 * 1024);
  });
});

describe("prompt cache beside other sequences decoding", () => {
  let cached: TestServer;
  let uncached: TestServer;
  beforeAll(async () => {
    const config = { parallel: 2, contextSize: 4096 };
    [cached, uncached] = await Promise.all([
      startTestServer({ models: { tiny: await testModelPath("tiny") }, config }),
      startTestServer({ models: { tiny: await testModelPath("tiny") }, config: { ...config, cacheRam: 0 } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([cached?.close(), uncached?.close()]);
  });

  it("saves and restores on one sequence while a long reply decodes on the other", async () => {
    // The long reply holds one sequence (3,000 tokens: it usually outlasts the three turns), so A
    // and B take turns on the other: B's turn saves A, A's return saves B and restores A, between
    // the long reply's steps.
    const long = longReply(cached);
    const withCache = await comeBack(cached);
    const withoutCache = await comeBack(uncached);
    expect(withCache.second.cachedTokens).toBeGreaterThanOrEqual(withCache.first.promptTokens);
    expect(withCache.second.reply).toBe(withoutCache.second.reply);
    // Not compared token for token with the reply decoded alone: which sequences share a batch
    // changes the rounding of its products (docs/performance.md), and over 3,000 tokens of a
    // random-weight model that changes the text. It ran to its length, unbroken.
    expect(await long).toEqual({ finish: "length", tokens: 3000 });
  });
});
