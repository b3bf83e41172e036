// Captures the streamed bytes of every wire format, so two checkouts can be compared byte for byte
// (issue 30: a refactor of the stream code must not change what clients read). It starts the built
// server of a checkout (`node CHECKOUT/bin/modelhost.cjs serve`, so run `npx tsc -p
// tsconfig.build.json` there first) on the tiny test models, sends a fixed set of streamed requests
// at temperature 0, one at a time, and writes each raw body with only its random parts normalised:
// ids become `<prefix>#n` (n counting the distinct ids of that body, so which events share an id
// still shows), and clock values (created, created_at, completed_at, *_duration) become 0.
//
//   node scripts/captureStreams.ts --checkout /tmp/pump-base --out /tmp/streams-base
//   node scripts/captureStreams.ts --checkout . --out /tmp/streams-new
//   diff -r /tmp/streams-base /tmp/streams-new
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { testModelPath } from "../test/support/testModels.js";

const { values } = parseArgs({
  options: { checkout: { type: "string", default: "." }, out: { type: "string" }, port: { type: "string", default: "18431" } },
});
if (values.out === undefined) throw new Error("usage: node scripts/captureStreams.ts --checkout DIR --out DIR [--port N]");
const outDir = path.resolve(values.out);
const port = Number(values.port);
const base = `http://127.0.0.1:${port}`;

const tools = [
  {
    name: "get_weather",
    description: "The current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];
const openaiTools = tools.map((tool) => ({ type: "function", function: tool }));
const ask = "What is the weather in Paris?";
const greet = "Say hello in five words.";

/** Each capture: a file name, a path and a body. `seed` and temperature 0 throughout. */
const requests: Array<[name: string, route: string, body: Record<string, unknown>]> = [
  [
    "chat-text",
    "/v1/chat/completions",
    {
      model: "tiny",
      messages: [{ role: "user", content: greet }],
      max_tokens: 24,
      temperature: 0,
      seed: 1,
      stream: true,
      stream_options: { include_usage: true },
    },
  ],
  [
    "chat-n2-logprobs",
    "/v1/chat/completions",
    {
      model: "tiny",
      messages: [{ role: "user", content: greet }],
      max_tokens: 8,
      temperature: 0,
      seed: 1,
      n: 2,
      logprobs: true,
      top_logprobs: 2,
      stream: true,
    },
  ],
  [
    "chat-tool",
    "/v1/chat/completions",
    {
      model: "tiny",
      messages: [{ role: "user", content: ask }],
      tools: openaiTools,
      tool_choice: "required",
      parallel_tool_calls: false,
      max_tokens: 200,
      temperature: 0,
      seed: 1,
      stream: true,
    },
  ],
  [
    "chat-think",
    "/v1/chat/completions",
    { model: "think", messages: [{ role: "user", content: greet }], max_tokens: 60, temperature: 0, seed: 1, stream: true },
  ],
  [
    "completions",
    "/v1/completions",
    {
      model: "tiny",
      prompt: ["Once upon a time", "The sky is"],
      max_tokens: 10,
      temperature: 0,
      seed: 1,
      logprobs: 2,
      stream: true,
      stream_options: { include_usage: true },
    },
  ],
  ["responses-text", "/v1/responses", { model: "tiny", input: greet, max_output_tokens: 24, temperature: 0, store: false, stream: true }],
  [
    "responses-tool",
    "/v1/responses",
    {
      model: "tiny",
      input: ask,
      tools: tools.map((tool) => ({ type: "function", ...tool })),
      tool_choice: "required",
      parallel_tool_calls: false,
      max_output_tokens: 200,
      temperature: 0,
      stream: true,
    },
  ],
  ["responses-think", "/v1/responses", { model: "think", input: greet, max_output_tokens: 60, temperature: 0, store: false, stream: true }],
  [
    "messages-text",
    "/v1/messages",
    { model: "tiny", messages: [{ role: "user", content: greet }], max_tokens: 24, temperature: 0, stream: true },
  ],
  [
    "messages-tool",
    "/v1/messages",
    {
      model: "tiny",
      messages: [{ role: "user", content: ask }],
      tools: tools.map(({ parameters, ...tool }) => ({ ...tool, input_schema: parameters })),
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      max_tokens: 200,
      temperature: 0,
      stream: true,
    },
  ],
  [
    "messages-think",
    "/v1/messages",
    {
      model: "think",
      messages: [{ role: "user", content: greet }],
      max_tokens: 60,
      temperature: 0,
      thinking: { type: "enabled", budget_tokens: 40 },
      stream: true,
    },
  ],
  [
    "ollama-chat-text",
    "/api/chat",
    { model: "tiny", messages: [{ role: "user", content: greet }], options: { temperature: 0, seed: 1, num_predict: 24 } },
  ],
  [
    "ollama-chat-tool",
    "/api/chat",
    {
      model: "tiny",
      messages: [{ role: "user", content: ask }],
      tools: openaiTools,
      tool_choice: "required",
      options: { temperature: 0, seed: 1, num_predict: 200 },
    },
  ],
  [
    "ollama-chat-think",
    "/api/chat",
    { model: "think", messages: [{ role: "user", content: greet }], think: true, options: { temperature: 0, seed: 1, num_predict: 60 } },
  ],
  ["ollama-generate", "/api/generate", { model: "tiny", prompt: greet, options: { temperature: 0, seed: 1, num_predict: 24 } }],
  [
    "ollama-generate-raw",
    "/api/generate",
    { model: "tiny", prompt: "Once upon a time", raw: true, options: { temperature: 0, seed: 1, num_predict: 16 } },
  ],
];

const ID = /\b(chatcmpl-|cmpl-|msg_|resp_|fc_|fco_|rs_|call_|toolu_)[A-Za-z0-9]+/g;
const CLOCK = /"(created|created_at|completed_at|total_duration|load_duration|prompt_eval_duration|eval_duration)":("[^"]*"|\d+)/g;

/** The body with its random ids numbered and its clock values zeroed. */
function normalized(body: string): string {
  const seen = new Map<string, string>();
  return body
    .replace(ID, (id: string, prefix: string) => {
      if (!seen.has(id)) seen.set(id, `${prefix}#${seen.size + 1}`);
      return seen.get(id)!;
    })
    .replace(CLOCK, (_, field: string) => `"${field}":0`);
}

const modelsDir = await mkdtemp(path.join(os.tmpdir(), "capture-models-"));
const dataDir = await mkdtemp(path.join(os.tmpdir(), "capture-data-"));
await symlink(await testModelPath("tiny"), path.join(modelsDir, "tiny.gguf"));
await symlink(await testModelPath("think-tiny"), path.join(modelsDir, "think.gguf"));
const flags = [
  "--port",
  String(port),
  "--models-dir",
  modelsDir,
  "--data-dir",
  dataDir,
  "--threads",
  "1",
  "--parallel",
  "2",
  "--context-size",
  "1024",
  "--log-level",
  "silent",
  "--stream-keepalive",
  "0",
];
const server = spawn(process.execPath, [path.join(path.resolve(values.checkout), "bin/modelhost.cjs"), "serve", ...flags], {
  stdio: ["ignore", "inherit", "pipe"],
});
try {
  await new Promise<void>((resolve, reject) => {
    server.stderr.on("data", (data: Buffer) => (data.toString().includes("listening on") ? resolve() : process.stderr.write(data)));
    server.once("exit", (code) => reject(new Error(`the server exited (${code}) before listening`)));
  });
  await mkdir(outDir, { recursive: true });
  for (const [name, route, body] of requests) {
    const response = await fetch(`${base}${route}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    await writeFile(path.join(outDir, `${name}.txt`), `${response.status} ${response.headers.get("content-type")}\n${normalized(text)}`);
    console.log(`${name}: ${response.status}, ${text.length} bytes`);
  }
} finally {
  server.kill("SIGTERM");
  await new Promise((resolve) => server.once("exit", resolve));
  await rm(modelsDir, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
}
