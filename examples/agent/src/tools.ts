// The functions the model may call. Each result goes back to the model as JSON; a function that
// throws, bad arguments and an unknown name come back as {"error": "..."} so the model can
// correct itself instead of the loop crashing. A tool may return images besides its JSON (a tool
// message carries text only, so the loop shows them to the model in a message of their own).
import type OpenAI from "openai";
import { calculate } from "./calculator.js";
import { findImage, readImage } from "./images.js";
import type { Match, Retriever } from "./retrieval.js";

/** What a tool run gets besides its arguments: the answer's cancellation and its sources listener. */
export interface ToolContext {
  signal?: AbortSignal;
  onSources(matches: Match[]): void;
}

/** An image for the model: the file's bytes in base64, and their media type (image/png, …). */
export interface ToolImage {
  mediaType: string;
  data: string;
}

/** What a run returns to give images besides its JSON result. */
export class WithImages {
  constructor(
    readonly result: unknown,
    readonly images: readonly ToolImage[],
  ) {}
}

export interface Tool {
  definition: OpenAI.ChatCompletionFunctionTool;
  /** The result, sent to the model as JSON; or `new WithImages(result, images)`. */
  run(args: Record<string, unknown>, context: ToolContext): unknown;
}

/** One call's outcome: the result for its tool message (an error is {"error": …}) and any images. */
export interface ToolOutput {
  result: unknown;
  images: readonly ToolImage[];
}

/** @param imageFolders the folders ingested, whose image files view_image shows (read at each call) */
export function createTools(retriever: Retriever, imageFolders: () => string[]): Tool[] {
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
    {
      definition: fn(
        "view_image",
        "Look at an image file (PNG, JPEG, GIF, WebP or BMP) from the user's documents; an unknown name gets the list of images.",
        {
          name: { type: "string", description: "The image's file name, such as chart.png, or its path in the documents", maxLength: 500 },
        },
      ),
      async run({ name }) {
        const image = await findImage(imageFolders(), String(name));
        const { mediaType, bytes } = await readImage(image);
        return new WithImages({ image: image.name, media_type: mediaType, bytes: bytes.length }, [
          { mediaType, data: bytes.toString("base64") },
        ]);
      },
    },
  ];
}

/** Runs one requested call; its result is for the `tool` message, as JSON. */
export async function runTool(tools: Tool[], call: OpenAI.ChatCompletionMessageToolCall, context: ToolContext): Promise<ToolOutput> {
  const failed = (error: string): ToolOutput => ({ result: { error }, images: [] });
  if (call.type !== "function") return failed(`unsupported tool type ${call.type}`);
  const tool = tools.find((candidate) => candidate.definition.function.name === call.function.name);
  if (!tool) return failed(`unknown tool "${call.function.name}"; available: ${tools.map((t) => t.definition.function.name).join(", ")}`);
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments || "{}");
  } catch (error) {
    return failed(`arguments are not valid JSON: ${(error as Error).message}`);
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) return failed("arguments must be a JSON object");
  try {
    const output = await tool.run(args as Record<string, unknown>, context);
    return output instanceof WithImages ? { result: output.result, images: output.images } : { result: output, images: [] };
  } catch (error) {
    if (context.signal?.aborted) throw error; // the request was cancelled: nothing to tell the model
    return failed(error instanceof Error ? error.message : String(error));
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
