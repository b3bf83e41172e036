import type { z } from "zod";
import {
  thinkingOf,
  type ChatMessage,
  type ChatRequest,
  type ResponseFormat,
  type SamplingOptions,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
  type MessageImage,
} from "../../core/ChatRequest.js";
import type { EmbedRequest } from "../../core/EmbedRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { checkSchemaBudget } from "../../core/checkRequestSchemas.js";
import { checkSchema } from "../checkSchema.js";
import { toToolChoice } from "../toolDefinitions.js";
import { parseBody } from "../parseBody.js";
import { parseKeepAlive } from "./parseKeepAlive.js";
import {
  chatRequestSchema,
  copyRequestSchema,
  embedRequestSchema,
  generateRequestSchema,
  legacyEmbeddingsRequestSchema,
  modelRequestSchema,
  pullRequestSchema,
  type ChatRequestBody,
  type WireChatMessage,
  type WireFormat,
  type WireOptions,
  type WireTool,
} from "./schemas.js";

/** A chat or generate request as the engine runs it, with what the route does around it. */
export interface NativeGeneration {
  chat: ChatRequest;
  /** Defaults to true on this API. */
  stream: boolean;
  /** Undefined: the server's --keep-alive. */
  keepAliveMs?: number;
  /** No messages (or no prompt): only load the model, or unload it with keep-alive 0. */
  loadOnly: boolean;
}

export interface NativeEmbedding {
  embed: EmbedRequest;
  keepAliveMs?: number;
}

/** parseBody, except that a missing body keeps Ollama's own error text, "missing request body". */
function parse<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (body === undefined) throw new ServerError("invalid_request", { message: "missing request body" });
  return parseBody(schema, body);
}

/** POST /api/chat. */
export function fromChatRequest(body: unknown): NativeGeneration {
  const wire = parse(chatRequestSchema, body);
  const messages = wire.messages ?? [];
  const format = typeof wire.format === "object" && wire.format !== null ? [wire.format] : [];
  checkSchemaBudget([...(wire.tools ?? []).map((tool) => tool.function.parameters), ...format], wire.tools?.length ? "tools" : "format");
  const tools = (wire.tools ?? []).map(toTool);
  return {
    chat: {
      model: wire.model,
      messages: toMessages(messages),
      ...toLengthAndSampling(wire.options),
      tools,
      toolChoice: toNativeToolChoice(wire.tool_choice, tools),
      parallelToolCalls: true,
      responseFormat: toResponseFormat(wire.format),
      ...toThinking(wire.think),
    },
    stream: wire.stream ?? true,
    keepAliveMs: parseKeepAlive(wire.keep_alive),
    loadOnly: messages.length === 0,
  };
}

/** `tool_choice` (an extension) as /v1 reads it: a named function must be one of the tools. */
function toNativeToolChoice(wire: ChatRequestBody["tool_choice"], tools: readonly ToolDefinition[]): ToolChoice {
  if (wire == null || typeof wire === "string") return toToolChoice(wire, tools, "tool_choice");
  if ("function" in wire) return toToolChoice(wire.function, tools, "tool_choice.function.name");
  return toToolChoice(wire, tools, "tool_choice.name");
}

/** POST /api/generate: a prompt rendered with the model's template, raw, or a fill-in-the-middle pair. */
export function fromGenerateRequest(body: unknown): NativeGeneration {
  const wire = parse(generateRequestSchema, body);
  if (wire.template) {
    throw new ServerError("invalid_request", {
      param: "template",
      message:
        "A 'template' cannot be given here: prompts are rendered with the model's own chat template. Send 'raw': true with a prompt you formatted yourself instead.",
    });
  }
  const prompt = wire.prompt ?? "";
  const system = wire.system ?? "";
  if (wire.raw === true && system !== "") {
    throw new ServerError("invalid_request", { param: "raw", message: "raw mode does not support template, system, or context" });
  }
  const images = toImages(wire.images, "images");
  if (images && (wire.raw === true || (wire.suffix != null && wire.suffix !== ""))) {
    throw new ServerError("invalid_request", {
      param: "images",
      message: "Images go into the model's chat template, so they cannot be sent with 'raw': true or a 'suffix'.",
    });
  }
  const messages: ChatMessage[] = [
    ...(system ? [{ role: "system" as const, content: system }] : []),
    { role: "user", content: prompt, ...(images ? { images } : {}) },
  ];
  const override: ChatRequest["prompt"] =
    wire.suffix != null && wire.suffix !== ""
      ? { type: "infill", prefix: prompt, suffix: wire.suffix }
      : wire.raw === true
        ? { type: "raw", text: prompt }
        : undefined;
  return {
    chat: {
      model: wire.model,
      messages,
      ...toLengthAndSampling(wire.options),
      tools: [],
      toolChoice: { type: "none" },
      parallelToolCalls: false,
      responseFormat: toResponseFormat(wire.format),
      ...toThinking(wire.think),
      ...(override ? { prompt: override } : {}),
    },
    stream: wire.stream ?? true,
    keepAliveMs: parseKeepAlive(wire.keep_alive),
    // An empty prompt only loads (or unloads) the model, raw or not, as the reference server does;
    // fill-in-the-middle with a suffix but no prefix is a real request.
    loadOnly: prompt === "" && override?.type !== "infill" && !images,
  };
}

/**
 * `think`: false turns thinking off; true turns it on, as it is by default; an effort level ("low",
 * "medium", "high", "max") turns it on at that level, for templates that read one (gpt-oss). Models
 * without a thought section ignore it (the reference server refuses `true` for them; clients that
 * always send it then work unchanged).
 */
function toThinking(think: ChatRequestBody["think"]): Pick<ChatRequest, "thinking" | "reasoningEffort"> {
  if (think == null) return {};
  return typeof think === "string" ? thinkingOf(think) : { thinking: think };
}

/** POST /api/embed: vectors L2-normalised; inputs longer than the context are cut unless truncate is false. */
export function fromEmbedRequest(body: unknown): NativeEmbedding {
  const wire = parse(embedRequestSchema, body);
  const inputs = wire.input == null ? [] : typeof wire.input === "string" ? [wire.input] : wire.input;
  return {
    embed: {
      model: wire.model,
      // An empty string is not embedded (it has no tokens to pool): `[""]` is as `[]`.
      inputs: inputs.filter((input) => input !== ""),
      ...(wire.dimensions == null ? {} : { dimensions: wire.dimensions }),
      truncate: wire.truncate ?? true,
    },
    keepAliveMs: parseKeepAlive(wire.keep_alive),
  };
}

/** POST /api/embeddings (legacy): one prompt, a vector not normalised, cut to the context. */
export function fromLegacyEmbeddingsRequest(body: unknown): NativeEmbedding {
  const wire = parse(legacyEmbeddingsRequestSchema, body);
  const prompt = wire.prompt ?? "";
  return {
    embed: { model: wire.model, inputs: prompt === "" ? [] : [prompt], truncate: true, normalize: false },
    keepAliveMs: parseKeepAlive(wire.keep_alive),
  };
}

/** show, delete: the model named (by `model`, or by the older `name`). */
export function fromModelRequest(body: unknown): { model: string; verbose: boolean } {
  return parse(modelRequestSchema, body);
}

/** POST /api/pull: the reference to pull; progress streams unless `stream` is false. */
export function fromPullRequest(body: unknown): { model: string; stream: boolean } {
  return parse(pullRequestSchema, body);
}

export function fromCopyRequest(body: unknown): { source: string; destination: string } {
  return parse(copyRequestSchema, body);
}

/**
 * `options` with the native API's defaults (temperature 0.8, top_k 40, top_p 0.9, repeat_last_n
 * 64). num_predict of 0 or less is no limit; num_ctx is the server's --context-size instead.
 */
function toLengthAndSampling(options: WireOptions | null | undefined): Pick<ChatRequest, "maxTokens" | "stop" | "sampling"> {
  const o = options ?? {};
  const stop = o.stop == null ? [] : typeof o.stop === "string" ? [o.stop] : o.stop;
  if (stop.includes("")) {
    throw new ServerError("invalid_request", {
      param: "options.stop",
      message: "Invalid value for 'options.stop': stop sequences must not be empty.",
    });
  }
  const sampling: SamplingOptions = {
    temperature: o.temperature ?? 0.8,
    topP: o.top_p ?? 0.9,
    topK: o.top_k ?? 40,
    minP: o.min_p ?? 0,
    ...(o.seed == null ? {} : { seed: o.seed }),
    presencePenalty: o.presence_penalty ?? 0,
    frequencyPenalty: o.frequency_penalty ?? 0,
    repeatPenalty: o.repeat_penalty ?? 1,
    // -1 is "the whole context": everything generated, as the penalties look at the reply only.
    penaltyWindow: o.repeat_last_n === -1 ? Infinity : (o.repeat_last_n ?? 64),
    logitBias: new Map(),
  };
  return { ...(o.num_predict != null && o.num_predict > 0 ? { maxTokens: o.num_predict } : {}), stop, sampling };
}

function toResponseFormat(format: WireFormat): ResponseFormat {
  if (format == null || format === "") return { type: "text" };
  if (format === "json") return { type: "json_object" };
  checkSchema(format, "format", "format");
  return { type: "json_schema", name: "format", schema: format };
}

function toTool({ function: fn }: WireTool, i: number): ToolDefinition {
  const parameters = fn.parameters ?? { type: "object", properties: {} };
  if (parameters.type !== "object") {
    throw new ServerError("invalid_request", {
      param: `tools[${i}].function.parameters.type`,
      message: `Invalid schema for function '${fn.name}': the parameters must be a JSON Schema with "type": "object".`,
    });
  }
  checkSchema(parameters, `tools[${i}].function.parameters`, `function '${fn.name}'`);
  return { name: fn.name, ...(fn.description == null ? {} : { description: fn.description }), parameters };
}

/**
 * A message's `images` (base64, Ollama's field), all before its text, where Ollama puts them (its
 * prompt renderer writes each image's tag ahead of the message's content).
 */
function toImages(images: readonly string[] | null | undefined, param: string): MessageImage[] | undefined {
  if (!images || images.length === 0) return undefined;
  return images.map((data, j) => ({ at: 0, param: `${param}[${j}]`, source: { type: "base64", data } }));
}

/**
 * Native messages to the engine's. A tool result names its function (`tool_name`) rather than a
 * call id, so it answers the first unanswered call of that name in the assistant message before it
 * (or the one with its `tool_call_id`, or the first unanswered one when it names none).
 */
function toMessages(messages: readonly WireChatMessage[]): ChatMessage[] {
  let unanswered: ToolCall[] = [];
  return messages.map((message, i): ChatMessage => {
    const content = message.content ?? "";
    const images = toImages(message.images, `messages[${i}].images`);
    if (images && message.role !== "user") {
      throw new ServerError("invalid_request", {
        param: `messages[${i}].images`,
        message: `Invalid value for 'messages[${i}].images': only user messages may show images; this one is from the ${message.role}.`,
      });
    }
    switch (message.role) {
      case "system":
        unanswered = [];
        return { role: message.role, content };
      case "user":
        unanswered = [];
        return { role: message.role, content, ...(images ? { images } : {}) };
      case "assistant": {
        const toolCalls = (message.tool_calls ?? []).map((call, j): ToolCall => ({
          id: call.id || `call_${i}_${j}`,
          name: call.function.name,
          arguments: typeof call.function.arguments === "string" ? call.function.arguments : JSON.stringify(call.function.arguments ?? {}),
        }));
        unanswered = [...toolCalls];
        const reasoning = message.thinking ? { reasoning: message.thinking } : {};
        return toolCalls.length > 0
          ? { role: "assistant", content, toolCalls, ...reasoning }
          : { role: "assistant", content, ...reasoning };
      }
      case "tool": {
        const answered =
          unanswered.find((call) => message.tool_call_id && call.id === message.tool_call_id) ??
          unanswered.find((call) => message.tool_name && call.name === message.tool_name) ??
          (message.tool_name || message.tool_call_id ? undefined : unanswered[0]);
        if (!answered) {
          throw new ServerError("invalid_request", {
            param: `messages[${i}]`,
            message: `Invalid value for 'messages[${i}]': this tool result answers no unanswered call${message.tool_name ? ` of '${message.tool_name}'` : ""} in the assistant message before it.`,
          });
        }
        unanswered = unanswered.filter((call) => call !== answered);
        return { role: "tool", content, toolCallId: answered.id };
      }
      default:
        return message.role satisfies never;
    }
  });
}
