// The prompt cache beyond the slots (--cache-ram): time to first token of a conversation that
// comes back after another took its only sequence, with the cache (8192 MiB), without it (0),
// and with no other conversation in between ("kept": the sequence still holds it). Bench model,
// 2 threads, alternating order. ROUNDS=5 node --import tsx bench/promptCacheTtft.ts
import { startTestServer, type TestServer } from "../test/support/startTestServer.js";
import { testModelPath } from "../test/support/testModels.js";

const ROUNDS = Number(process.env.ROUNDS ?? 5);
type Message = { role: "system" | "user" | "assistant"; content: string };
const words = (topic: string, n: number) => Array.from({ length: n }, (_, i) => `${topic}${i % 97}`).join(" ");

async function ttft(server: TestServer, messages: Message[]): Promise<{ ms: number; reply: string; cached: number; prompt: number }> {
  const started = performance.now();
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages, max_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  // Time to the first content token: the first chunk may be a keepalive comment (after 15 s
  // without an event) or the role chunk, so the stream is read event by event.
  let first: number | undefined;
  let buffered = "";
  let reply = "";
  let usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens: number } } | undefined;
  const decoder = new TextDecoder();
  for await (const chunk of response.body!) {
    buffered += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffered.indexOf("\n")) !== -1) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      if (!line.startsWith("data: {")) continue;
      const event = JSON.parse(line.slice(6));
      const content = event.choices?.[0]?.delta?.content ?? "";
      if (content) first ??= performance.now();
      reply += content;
      if (event.usage) usage = event.usage;
    }
  }
  return { ms: first! - started, reply, cached: usage?.prompt_tokens_details?.cached_tokens ?? 0, prompt: usage?.prompt_tokens ?? 0 };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const model = await testModelPath("bench");
const servers: Record<string, TestServer> = {};
for (const [name, cacheRam] of [
  ["cache", 8192],
  ["no cache", 0],
] as const)
  servers[name] = await startTestServer({ models: { m: model }, config: { parallel: 1, threads: 2, contextSize: 4096, cacheRam } });
servers["kept"] = servers["cache"]!;
const results: Record<string, number[]> = { cache: [], "no cache": [], kept: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const name of round % 2 === 0 ? ["cache", "no cache", "kept"] : ["kept", "no cache", "cache"]) {
    const server = servers[name]!;
    // A: a ~1,500-token system prompt (tool definitions) and a ~150-token turn; then B, with a system
    // prompt of its own, takes the one sequence; then A's next turn comes back.
    const a: Message[] = [
      { role: "system", content: `${words(`tool${round}a`, 215)}` },
      { role: "user", content: words(`question${round}a`, 21) },
    ];
    const first = await ttft(server, a);
    a.push({ role: "assistant", content: first.reply }, { role: "user", content: words(`followup${round}a`, 21) });
    // "kept": no B; the sequence still holds A when it comes back (the best a cache can do).
    if (name !== "kept")
      await ttft(server, [
        { role: "system", content: words(`tool${round}b`, 215) },
        { role: "user", content: words(`question${round}b`, 21) },
      ]);
    const back = await ttft(server, a);
    results[name]!.push(back.ms);
    console.log(`${name}: round ${round}: prompt ${back.prompt} tokens, ${back.cached} cached, TTFT ${back.ms.toFixed(1)} ms`);
  }
}
for (const [name, values] of Object.entries(results))
  console.log(`${name}: median TTFT of the returning turn ${median(values).toFixed(1)} ms`);
console.log(`ratio cache/no cache: ${(median(results.cache!) / median(results["no cache"]!)).toFixed(3)}`);
for (const server of new Set(Object.values(servers))) await server.close();
