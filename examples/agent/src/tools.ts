// The functions the model may call. Each result goes back to the model as JSON; a function that
// throws, bad arguments and an unknown name come back as {"error": "..."} so the model can
// correct itself instead of the loop crashing.
import type OpenAI from "openai";
import { calculate } from "./calculator.js";
import type { Match, Retriever } from "./retrieval.js";

/** What a tool run gets besides its arguments: the answer's cancellation and its sources listener. */
export interface ToolContext {
  signal?: AbortSignal;
  onSources(matches: Match[]): void;
}

export interface Tool {
  definition: OpenAI.ChatCompletionFunctionTool;
  run(args: Record<string, unknown>, context: ToolContext): unknown;
}

export function createTools(retriever: Retriever): Tool[] {
  return [
    {
      definition: fn("search_documents", "Search the user's documents; returns the passages related to the query, with their sources.", {
        query: { type: "string", description: "What to look for", maxLength: 500 },
      }),
      async run({ query }, { signal, onSources }) {
        const matches = await retriever.search(String(query), signal);
        onSources(matches);
        const results = matches
          .filter((match) => match.used)
          .map(({ source, similarity, text }) => ({ source, similarity: round(similarity), text }));
        return results.length > 0
          ? { results }
          : { results, note: "No passage is similar enough: there is no information on that in the documents." };
      },
    },
    {
      definition: fn("current_time", "The current date and time in an IANA time zone.", {
        time_zone: { type: "string", description: "IANA time zone such as Europe/Paris or UTC", maxLength: 64 },
      }),
      run: ({ time_zone }) => currentTime(String(time_zone)),
    },
    {
      definition: fn(
        "calculate",
        "Evaluate an arithmetic expression: + - * / % ^, parentheses, sqrt abs round floor ceil ln log10 min max, pi, e.",
        {
          expression: { type: "string", description: "For example (17 + 25) * 2 ^ 3", maxLength: 500 },
        },
      ),
      run: ({ expression }) => ({ expression, result: calculate(String(expression)) }),
    },
  ];
}

/** Runs one requested call; the result is always a JSON string for the `tool` message. */
export async function runTool(tools: Tool[], call: OpenAI.ChatCompletionMessageToolCall, context: ToolContext): Promise<string> {
  if (call.type !== "function") return JSON.stringify({ error: `unsupported tool type ${call.type}` });
  const tool = tools.find((candidate) => candidate.definition.function.name === call.function.name);
  if (!tool)
    return JSON.stringify({
      error: `unknown tool "${call.function.name}"; available: ${tools.map((t) => t.definition.function.name).join(", ")}`,
    });
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments || "{}");
  } catch (error) {
    return JSON.stringify({ error: `arguments are not valid JSON: ${(error as Error).message}` });
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) return JSON.stringify({ error: "arguments must be a JSON object" });
  try {
    return JSON.stringify(await tool.run(args as Record<string, unknown>, context));
  } catch (error) {
    if (context.signal?.aborted) throw error; // the request was cancelled: nothing to tell the model
    return JSON.stringify({ error: error instanceof Error ? error.message : String(error) });
  }
}

/** e.g. {"time_zone":"Europe/Paris","local":"2026-11-23 09:15:02","offset":"GMT+01:00","weekday":"Monday","utc":"2026-11-23T08:15:02.000Z"} */
export function currentTime(timeZone: string, now = new Date()): Record<string, string> {
  // Throws RangeError("Invalid time zone specified: …") for a name that is not IANA.
  const format = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    hourCycle: "h23",
    weekday: "long",
    timeZoneName: "longOffset",
  });
  const part = (type: Intl.DateTimeFormatPartTypes) => format.formatToParts(now).find((p) => p.type === type)?.value ?? "";
  return {
    time_zone: timeZone,
    local: `${part("year")}-${part("month")}-${part("day")} ${part("hour")}:${part("minute")}:${part("second")}`,
    offset: part("timeZoneName"),
    weekday: part("weekday"),
    utc: now.toISOString(),
  };
}

function fn(name: string, description: string, properties: Record<string, object>): OpenAI.ChatCompletionFunctionTool {
  return {
    type: "function",
    function: {
      name,
      description,
      parameters: { type: "object", properties, required: Object.keys(properties), additionalProperties: false },
    },
  };
}

const round = (value: number) => Math.round(value * 1000) / 1000;
