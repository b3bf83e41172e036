import { z } from "zod";
import {
  thinkingOf,
  type ChatMessage,
  type ChatRequest,
  type ResponseFormat,
  type ToolCall,
  type ToolDefinition,
} from "../../core/ChatRequest.js";
import { checkSchemaBudget } from "../../core/checkRequestSchemas.js";
import { ServerError } from "../../core/ServerError.js";
import { checkJsonDepth } from "../checkSchema.js";
import { parseBody } from "../parseBody.js";
import { joinContentParts, type ContentPart } from "../contentParts.js";
import { toInvalidRequestError } from "../toInvalidRequestError.js";
import { toJsonSchemaFormat, toToolChoice, toToolDefinitions } from "../toolDefinitions.js";
import {
  createResponseSchema,
  functionToolSchema,
  inputItemSchemas,
  type CreateResponseBody,
  type InputImage,
  type InputText,
  type ItemReference,
  type OutputItem,
  type ResponseSettings,
  type StoredInputItem,
  type WireTextFormat,
  type WireToolChoice,
} from "./schemas.js";
import { newItemId } from "./ids.js";

/**
 * A validated create request. The conversation is not built yet: with `previous_response_id` the
 * stored conversation comes first, and `item_reference` items stand for stored items; only the
 * route can fetch them (see `resolveItemReferences` and `toChatRequest`).
 */
export interface ParsedResponseRequest {
  settings: ResponseSettings;
  stream: boolean;
  /** This request's input items, each with an id, references still unresolved. */
  input: Array<StoredInputItem | ItemReference>;
  tools: ToolDefinition[];
  chat: Omit<ChatRequest, "messages">;
}

/** A create request whose item references are replaced by the stored items: its input is what `input_items` lists after the stored prefix. */
export interface ResolvedResponseRequest extends Omit<ParsedResponseRequest, "input"> {
  input: StoredInputItem[];
}

/** Validates a POST /v1/responses body. */
export function fromResponseRequest(body: unknown): ParsedResponseRequest {
  const wire = parseBody(createResponseSchema, body);
  refuseUnsupported(wire);
  if (wire.input === undefined && wire.previous_response_id == null) {
    throw new ServerError("invalid_request", {
      param: "input",
      message: "Missing required parameter: 'input' (it may be left out only with 'previous_response_id').",
    });
  }

  const functionTools = (wire.tools ?? []).map((tool, i) => {
    if (tool.type !== "function") {
      throw new ServerError("invalid_request", {
        param: `tools[${i}].type`,
        message: `Invalid value for 'tools[${i}].type': tools of type '${tool.type}' are not supported by this server; only 'function' tools are.`,
      });
    }
    return parseAt(functionToolSchema, tool, ["tools", i], body);
  });
  const format = wire.text?.format ?? { type: "text" as const };
  checkSchemaBudget(
    [...functionTools.map((tool) => tool.parameters ?? {}), ...(format.type === "json_schema" ? [format.schema] : [])],
    functionTools.length > 0 ? "tools" : "text.format",
  );
  const tools = toToolDefinitions(functionTools, (i) => `tools[${i}]`);
  const wireChoice = toWireToolChoice(wire.tool_choice);
  const toolChoice = toToolChoice(typeof wireChoice === "object" ? { name: wireChoice.name } : wireChoice, tools, "tool_choice.name");
  const effort = wire.reasoning?.effort ?? null;

  const settings: ResponseSettings = {
    model: wire.model,
    instructions: wire.instructions ?? null,
    max_output_tokens: wire.max_output_tokens ?? null,
    parallel_tool_calls: wire.parallel_tool_calls ?? true,
    previous_response_id: wire.previous_response_id ?? null,
    prompt_cache_key: wire.prompt_cache_key ?? null,
    reasoning: { effort, summary: wire.reasoning?.summary ?? wire.reasoning?.generate_summary ?? null },
    safety_identifier: wire.safety_identifier ?? null,
    // Every request is served the same way here: "default", as OpenAI reports a request without a tier.
    service_tier: "default",
    // OpenAI's default: stored, so that it can be retrieved and continued.
    store: wire.store ?? true,
    temperature: wire.temperature ?? 1,
    text: { format, verbosity: wire.text?.verbosity ?? "medium" },
    // OpenAI echoes "auto" for a request that sent none.
    tool_choice: wireChoice ?? "auto",
    tools: functionTools.map((tool) => ({
      type: "function",
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      strict: tool.strict ?? true,
    })),
    top_logprobs: wire.top_logprobs ?? 0,
    top_p: wire.top_p ?? 1,
    truncation: wire.truncation ?? "disabled",
    user: wire.user ?? null,
    metadata: wire.metadata ?? {},
  };
  return {
    settings,
    stream: wire.stream === true,
    input: toInputItems(wire.input, body),
    tools,
    chat: {
      model: wire.model,
      ...(wire.max_output_tokens == null ? {} : { maxTokens: wire.max_output_tokens }),
      stop: [],
      sampling: {
        temperature: settings.temperature,
        topP: settings.top_p,
        presencePenalty: 0,
        frequencyPenalty: 0,
        logitBias: new Map(),
      },
      tools,
      toolChoice,
      parallelToolCalls: settings.parallel_tool_calls,
      responseFormat: toResponseFormat(format),
      // The answer's token log-probabilities, with `top_logprobs` alternatives each, as OpenAI: asked for by `include`.
      ...(wire.include?.includes("message.output_text.logprobs") ? { logprobs: { top: wire.top_logprobs ?? 0 } } : {}),
      // "none" turns thinking off where the template can; any other effort asks for it, at that level.
      ...(effort === null ? {} : thinkingOf(effort)),
      ...(wire.prompt_cache_key ? { promptCacheKey: wire.prompt_cache_key } : {}),
    },
  };
}

/** The ids of the stored items the request's `item_reference` items name, each once. */
export function referencedItemIds(request: ParsedResponseRequest): string[] {
  return [...new Set(request.input.flatMap((item) => (item.type === "item_reference" ? [item.id] : [])))];
}

/**
 * The request with each `item_reference` replaced by the stored item it names (`found`: the
 * caller's stored items by id, looked up by the route). An id not found is OpenAI's 400, worded
 * as OpenAI words it (param `input`, no code; reported in vercel/ai#7543 and
 * continuedev/continue#9101): its items may be another account's, expired, deleted or never
 * stored, and which is not told.
 */
export function resolveItemReferences(request: ParsedResponseRequest, found: ReadonlyMap<string, object>): ResolvedResponseRequest {
  const input = request.input.map((item): StoredInputItem => {
    if (item.type !== "item_reference") return item;
    const stored = found.get(item.id);
    if (!stored) {
      throw new ServerError("invalid_request", {
        param: "input",
        message: `Item with id '${item.id}' not found. Items are not persisted when \`store\` is set to false. Try again with \`store\` set to true, or remove this item from your input.`,
      });
    }
    // The store keeps the items this translator and the ResponseStream wrote.
    return stored as StoredInputItem;
  });
  return { ...request, input };
}

/** The engine's request: the stored conversation (`prefix`: an earlier response's input and output), then this request's input. */
export function toChatRequest(request: ResolvedResponseRequest, prefix: ReadonlyArray<StoredInputItem | OutputItem>): ChatRequest {
  const instructions: ChatMessage[] =
    request.settings.instructions === null ? [] : [{ role: "system", content: request.settings.instructions }];
  const messages = toMessages(prefix, request.input);
  if (messages.length === 0)
    throw new ServerError("invalid_request", {
      param: "input",
      message: "Invalid value for 'input': there is nothing to answer; send at least one message.",
    });
  return { ...request.chat, messages: [...instructions, ...messages] };
}

function refuseUnsupported(wire: CreateResponseBody): void {
  const refuse = (param: string, why: string) => {
    throw new ServerError("invalid_request", { param, message: `Invalid value for '${param}': ${why}` });
  };
  if (wire.background)
    refuse("background", "background responses are not supported by this server; send the request without it (or stream it).");
  if (wire.conversation != null)
    refuse("conversation", "the Conversations API is not supported by this server; use 'previous_response_id' to continue a conversation.");
  if (wire.prompt != null)
    refuse("prompt", "stored prompt templates are not supported by this server; send 'instructions' and 'input' instead.");
}

function toWireToolChoice(wire: CreateResponseBody["tool_choice"]): WireToolChoice | undefined {
  if (wire == null || typeof wire === "string") return wire ?? undefined;
  if (wire.type === "function" && "name" in wire && typeof wire.name === "string") return { type: "function", name: wire.name };
  throw new ServerError("invalid_request", {
    param: "tool_choice.type",
    message: `Invalid value for 'tool_choice.type': a tool choice of type '${wire.type}' is not supported by this server; use "none", "auto", "required" or {"type": "function", "name": …}.`,
  });
}

function toResponseFormat(format: WireTextFormat): ResponseFormat {
  switch (format.type) {
    case "text":
    case "json_object":
      return { type: format.type };
    case "json_schema":
      return toJsonSchemaFormat(format.name, format.schema, "text.format.schema");
    default:
      return format satisfies never;
  }
}

/** Validates `value` at `path` of the body, so the error names the full wire path (`input[2].call_id`). */
function parseAt<T>(schema: z.ZodType<T>, value: unknown, path: PropertyKey[], body: unknown): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((issue) => ({ ...issue, path: [...path, ...issue.path] }));
  throw toInvalidRequestError(new z.ZodError(issues), body);
}

/** Each input item checked by its type's schema and given an id, as `input_items` lists it; references are kept for the route to resolve. */
function toInputItems(input: CreateResponseBody["input"], body: unknown): Array<StoredInputItem | ItemReference> {
  // Left out (with previous_response_id): nothing new, the stored conversation is answered.
  if (input === undefined) return [];
  // A string is one user message.
  if (typeof input === "string")
    return [{ type: "message", id: newItemId("msg"), role: "user", status: "completed", content: [{ type: "input_text", text: input }] }];
  return input.map((raw, i): StoredInputItem | ItemReference => {
    const param = `input[${i}]`;
    const type = raw.type ?? "message";
    switch (type) {
      case "message": {
        const item = parseAt(inputItemSchemas.message, raw, ["input", i], body);
        const id = item.id ?? newItemId("msg");
        if (item.role === "assistant") {
          const texts = toTexts(item.content, `${param}.content`, ["output_text", "input_text"]);
          return {
            type: "message",
            id,
            role: "assistant",
            status: "completed",
            content: texts.map((text) => ({ type: "output_text", text, annotations: [], logprobs: [] })),
          };
        }
        return {
          type: "message",
          id,
          role: item.role,
          status: "completed",
          content: toInputContent(item.content, `${param}.content`, item.role),
        };
      }
      case "function_call": {
        const item = parseAt(inputItemSchemas.function_call, raw, ["input", i], body);
        const args = checkJsonDepth(item.arguments, `${param}.arguments`);
        return {
          type: "function_call",
          id: item.id ?? newItemId("fc"),
          call_id: item.call_id,
          name: item.name,
          arguments: args,
          status: "completed",
        };
      }
      case "function_call_output": {
        const item = parseAt(inputItemSchemas.function_call_output, raw, ["input", i], body);
        const output = typeof item.output === "string" ? item.output : toTexts(item.output, `${param}.output`, ["input_text"]).join("\n");
        return {
          type: "function_call_output",
          id: item.id ?? newItemId("fco"),
          call_id: item.call_id,
          output: checkJsonDepth(output, `${param}.output`),
          status: "completed",
        };
      }
      case "reasoning": {
        const item = parseAt(inputItemSchemas.reasoning, raw, ["input", i], body);
        return {
          type: "reasoning",
          id: item.id ?? newItemId("rs"),
          summary: item.summary,
          content: item.content ?? [],
          status: "completed",
        };
      }
      case "item_reference": {
        const item = parseAt(inputItemSchemas.item_reference, raw, ["input", i], body);
        return { type: "item_reference", id: item.id };
      }
      default:
        throw new ServerError("invalid_request", {
          param: `${param}.type`,
          message: `Invalid value for '${param}.type': input items of type '${type}' are not supported by this server; send 'message', 'function_call', 'function_call_output', 'reasoning' or 'item_reference' items.`,
        });
    }
  });
}

/** A message's input content: text parts, and in a user message images (by data: or http(s) URL; files by id are not kept here). */
function toInputContent(content: string | Array<{ type: string }>, param: string, role: string): Array<InputText | InputImage> {
  if (typeof content === "string") return [{ type: "input_text", text: content }];
  const allowed = role === "user" ? ["input_text", "input_image"] : ["input_text"];
  return content.map((part, j): InputText | InputImage => {
    if (part.type !== "input_image" || role !== "user") return { type: "input_text", text: toTexts([part], param, allowed)[0]! };
    const { image_url: url, file_id: file, detail } = part as { image_url?: unknown; file_id?: unknown; detail?: unknown };
    if (typeof url !== "string" || url === "") {
      throw new ServerError("invalid_request", {
        param: `${param}[${j}].image_url`,
        message:
          file !== undefined
            ? `Invalid value for '${param}[${j}].file_id': this server keeps no files; send the image as 'image_url' (a data: URL).`
            : `Missing required parameter: '${param}[${j}].image_url'.`,
      });
    }
    return { type: "input_image", image_url: url, detail: detail === "low" || detail === "high" ? detail : "auto" };
  });
}

/** The texts of a content field: a string, or parts of the allowed text types. */
function toTexts(content: string | Array<{ type: string }>, param: string, allowed: readonly string[]): string[] {
  if (typeof content === "string") return [content];
  return content.map((part, j) => {
    if (!allowed.includes(part.type)) {
      throw new ServerError("invalid_request", {
        param: `${param}[${j}].type`,
        message: `Invalid value for '${param}[${j}].type': content parts of type '${part.type}' are not supported by this server (its models read text); use ${allowed.map((type) => `'${type}'`).join(" or ")}.`,
      });
    }
    const text = (part as { text?: unknown }).text;
    if (typeof text !== "string")
      throw new ServerError("invalid_request", {
        param: `${param}[${j}].text`,
        message: `Missing required parameter: '${param}[${j}].text'.`,
      });
    return text;
  });
}

/**
 * The conversation as engine messages. Consecutive function calls (and the assistant text before
 * them) are one assistant turn; a call's output must answer a call made before it. A reasoning
 * item's text is the thought of the assistant turn after it: templates that keep thoughts print it
 * (gpt-oss's analysis before a call), those that drop earlier turns' thoughts leave it out.
 */
function toMessages(prefix: ReadonlyArray<StoredInputItem | OutputItem>, input: readonly StoredInputItem[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const answerable = new Set<string>();
  const items = [...prefix, ...input];
  // The reasoning items' text since the last assistant turn, for the next one.
  let reasoning = "";
  const withReasoning = <Message extends ChatMessage & { role: "assistant" }>(message: Message): Message => {
    const thought = reasoning;
    reasoning = "";
    return thought === "" ? message : { ...message, reasoning: thought };
  };
  items.forEach((item, position) => {
    const param = `input[${position - prefix.length}]`;
    switch (item.type) {
      case "message": {
        if (item.role === "assistant") {
          messages.push(withReasoning({ role: "assistant", content: item.content.map((part) => part.text).join("\n") }));
        } else if (item.role === "user") {
          const parts = item.content.map((part, j): ContentPart =>
            part.type === "input_text"
              ? { text: part.text }
              : { image: { param: `${param}.content[${j}].image_url`, source: { type: "url", url: part.image_url } } },
          );
          messages.push({ role: "user", ...joinContentParts(parts) });
        } else {
          messages.push({ role: "system", content: item.content.map((part) => (part.type === "input_text" ? part.text : "")).join("\n") });
        }
        return;
      }
      case "function_call": {
        const call: ToolCall = { id: item.call_id, name: item.name, arguments: item.arguments };
        answerable.add(item.call_id);
        const last = messages.at(-1);
        if (last?.role === "assistant") last.toolCalls = [...(last.toolCalls ?? []), call];
        else messages.push(withReasoning({ role: "assistant", content: "", toolCalls: [call] }));
        return;
      }
      case "function_call_output":
        if (!answerable.has(item.call_id)) {
          throw new ServerError("invalid_request", {
            param: `${param}.call_id`,
            message: `Invalid value for '${param}.call_id': no function_call item before it has call_id '${item.call_id}'.`,
          });
        }
        answerable.delete(item.call_id);
        messages.push({ role: "tool", content: item.output, toolCallId: item.call_id });
        return;
      case "reasoning":
        reasoning += (reasoning === "" ? "" : "\n") + (item.content ?? []).map((part) => part.text).join("");
        return;
      default:
        return item satisfies never;
    }
  });
  return messages;
}
