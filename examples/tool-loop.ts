// A tool-calling agent loop with the official `openai` client, against any compatible server.
//
//   OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_API_KEY=local MODEL=qwen2.5:0.5b \
//     npm run example:tool-loop -- "What is the weather in Paris, and what is 17 + 25?"
//
// The tool phase is unstreamed: run each requested function, append the assistant message and one
// tool message per call, ask again while the model wants tools (at most MAX_ROUNDS times). Then the
// final answer streams to the terminal. TOOL_CHOICE=required forces a call in the first round
// (handy with small models that rarely decide to call on their own); MAX_TOKENS caps each reply;
// TEMPERATURE sets the sampling temperature (0 makes a run repeatable).
import OpenAI from "openai";

const MAX_ROUNDS = 5;
/** Optional cap on each reply's length (MAX_TOKENS) and sampling temperature (TEMPERATURE), e.g. for tests. */
const limit = {
  ...(process.env.MAX_TOKENS ? { max_tokens: Number(process.env.MAX_TOKENS) } : {}),
  ...(process.env.TEMPERATURE ? { temperature: Number(process.env.TEMPERATURE) } : {}),
};

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather in a city",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", description: "City name", maxLength: 60 },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      description: "Add two numbers",
      parameters: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
        additionalProperties: false,
      },
    },
  },
];

/** The functions themselves: toy implementations, deterministic so runs can be compared. */
const implementations: Record<string, (args: Record<string, unknown>) => unknown> = {
  get_weather: ({ city, unit = "celsius" }) => {
    const celsius = 10 + ((String(city).length * 7) % 20);
    return { city, unit, temperature: unit === "fahrenheit" ? Math.round(celsius * 1.8 + 32) : celsius, sky: "clear" };
  },
  add: ({ a, b }) => ({ sum: Number(a) + Number(b) }),
};

function runTool(call: OpenAI.ChatCompletionMessageToolCall): string {
  if (call.type !== "function") return JSON.stringify({ error: `unsupported tool type ${call.type}` });
  const implementation = implementations[call.function.name];
  if (!implementation) return JSON.stringify({ error: `unknown function ${call.function.name}` });
  try {
    return JSON.stringify(implementation(JSON.parse(call.function.arguments) as Record<string, unknown>));
  } catch (error) {
    // Tell the model what went wrong instead of crashing the loop: it can correct itself.
    return JSON.stringify({ error: `bad arguments: ${(error as Error).message}` });
  }
}

async function main(): Promise<void> {
  const client = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY from the environment
  const model = process.env.MODEL ?? "gpt-4o-mini";
  const question = process.argv.slice(2).join(" ") || "What is the weather in Paris, and what is 17 + 25?";
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: "You are a helpful assistant. Use the tools when they help." },
    { role: "user", content: question },
  ];

  for (let round = 1; round <= MAX_ROUNDS; round++) {
    const toolChoice = round === 1 && process.env.TOOL_CHOICE === "required" ? "required" : "auto";
    const reply = await client.chat.completions.create({ model, messages, tools, tool_choice: toolChoice, ...limit });
    const choice = reply.choices[0];
    if (!choice || choice.finish_reason !== "tool_calls" || !choice.message.tool_calls?.length) break;
    messages.push({ role: "assistant", content: choice.message.content, tool_calls: choice.message.tool_calls });
    for (const call of choice.message.tool_calls) {
      const result = runTool(call);
      const name = call.type === "function" ? call.function.name : call.type;
      console.error(`[round ${round}] ${name}(${call.type === "function" ? call.function.arguments : ""}) -> ${result}`);
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }

  // The final answer, streamed; no more tool calls.
  const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: "none", stream: true, ...limit });
  for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta.content ?? "");
  process.stdout.write("\n");
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exitCode = 1;
});
