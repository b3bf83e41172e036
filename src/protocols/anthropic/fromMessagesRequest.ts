import { z } from "zod";
import {
  thinkingOf,
  type ChatMessage,
  type ChatRequest,
  type MessageImage,
  type ResponseFormat,
  type ToolChoice,
  type ToolDefinition,
} from "../../core/ChatRequest.js";
import { checkSchemaBudget } from "../../core/checkRequestSchemas.js";
import { ServerError } from "../../core/ServerError.js";
import { checkJsonDepth, checkSchema } from "../checkSchema.js";
import { parseBody } from "../parseBody.js";
import { joinContentParts, type ContentPart } from "../contentParts.js";
import { formatParam, toInvalidRequestError } from "../toInvalidRequestError.js";
import {
  contentBlockSchemas,
  contentBlockTypes,
  countTokensRequestSchema,
  customToolSchema,
  messagesRequestSchema,
  type CountTokensRequestBody,
  type WireContentBlock,
  type WireToolChoice,
} from "./schemas.js";

export interface ParsedMessagesRequest {
  chat: ChatRequest;
  stream: boolean;
}

/** Validates a `POST /v1/messages` body and translates it to the engine's request. */
export function fromMessagesRequest(body: unknown): ParsedMessagesRequest {
  const wire = parseBody(messagesRequestSchema, body);
  const chat = toChatRequest(wire, body);
  return {
    chat: {
      ...chat,
      maxTokens: wire.max_tokens,
      stop: wire.stop_sequences ?? [],
      sampling: {
        // Anthropic's default temperature is 1; top_p and top_k apply only when sent.
        temperature: wire.temperature ?? 1,
        topP: wire.top_p ?? 1,
        // Without top_k, the server's default (40, as llama-server and Ollama), as for the other APIs.
        ...(wire.top_k === undefined ? {} : { topK: wire.top_k }),
        presencePenalty: 0,
        frequencyPenalty: 0,
        logitBias: new Map(),
      },
    },
    stream: wire.stream === true,
  };
}

/** Validates a `POST /v1/messages/count_tokens` body: the request whose prompt is to be counted. */
export function fromCountTokensRequest(body: unknown): ChatRequest {
  return toChatRequest(parseBody(countTokensRequestSchema, body), body);
}

/** What shapes the prompt, common to both endpoints; sampling and length are the caller's. */
function toChatRequest(wire: CountTokensRequestBody, body: unknown): ChatRequest {
  const format = wire.output_config?.format ? [wire.output_config.format.schema] : [];
  const wireTools = wire.tools ?? [];
  checkSchemaBudget(
    [...wireTools.map((tool) => (tool as { input_schema?: unknown }).input_schema), ...format],
    wireTools.length > 0 ? "tools" : "output_config.format",
  );
  const tools = toTools(wireTools, body);
  const effort = wire.output_config?.effort;
  // output_config.effort ("low" … "max") sets the level for templates that read one (gpt-oss).
  const thinking = {
    ...(wire.thinking?.type === "disabled" ? { thinking: false } : wire.thinking?.type === "enabled" ? { thinking: true } : {}),
    ...(effort != null && wire.thinking?.type !== "disabled" ? { reasoningEffort: thinkingOf(effort).reasoningEffort } : {}),
  };
  const messages = toMessages(toTurns(wire.messages, body));
  const last = messages.at(-1);
  // A final assistant turn of text is a prefill: the reply continues it, and holds only what follows.
  const prefill = last?.role === "assistant" && last.content !== "" ? { continueLastMessage: true } : {};
  return {
    model: wire.model,
    messages: [...toSystem(wire.system), ...messages],
    stop: [],
    sampling: { temperature: 1, topP: 1, presencePenalty: 0, frequencyPenalty: 0, logitBias: new Map() },
    tools,
    ...toToolChoice(wire.tool_choice, tools),
    responseFormat: toResponseFormat(wire.output_config?.format),
    ...thinking,
    ...prefill,
  };
}

function toSystem(system: CountTokensRequestBody["system"]): ChatMessage[] {
  if (system === undefined) return [];
  const text = typeof system === "string" ? system : system.map((block) => block.text).join("\n");
  return text === "" ? [] : [{ role: "system", content: text }];
}

/** A turn as the API reads it: consecutive messages of one role, their blocks in order, each with its place in the body. */
interface Turn {
  role: "user" | "assistant";
  blocks: Array<{ block: WireContentBlock; i: number; j: number }>;
}

/**
 * Consecutive messages of one role are one turn, as the API combines them (two user messages in a
 * row are one user turn), so templates that require alternating roles render any conversation.
 */
function toTurns(messages: CountTokensRequestBody["messages"], body: unknown): Turn[] {
  const turns: Turn[] = [];
  messages.forEach((message, i) => {
    const blocks =
      typeof message.content === "string"
        ? [{ block: { type: "text" as const, text: message.content }, i, j: 0 }]
        : message.content.map((block, j) => ({ block: toBlock(block, ["messages", i, "content", j], body), i, j }));
    const last = turns.at(-1);
    if (last?.role === message.role) last.blocks.push(...blocks);
    else turns.push({ role: message.role, blocks });
  });
  return turns;
}

/**
 * Anthropic's turns hold blocks; the engine's are OpenAI-like: an assistant turn's tool_use
 * blocks become its tool calls, and a user turn's tool_result blocks become tool messages (before
 * the turn's text, as the API asks clients to put them first).
 */
function toMessages(turns: readonly Turn[]): ChatMessage[] {
  const result: ChatMessage[] = [];
  // The tool_use ids of the assistant turn just before, which the next user turn may answer.
  let answerable = new Set<string>();
  for (const turn of turns) {
    const blocks = turn.blocks.map(({ block }) => block);
    if (turn.role === "assistant") {
      answerable = new Set();
      const toolCalls = turn.blocks.flatMap(({ block, i, j }) => {
        if (block.type === "tool_result") throw misplaced(i, j, "tool_result", "user");
        if (block.type !== "tool_use") return [];
        answerable.add(block.id);
        const param = formatParam(["messages", i, "content", j, "input"]);
        return [{ id: block.id, name: block.name, arguments: checkJsonDepth(JSON.stringify(block.input), param) }];
      });
      const content = textOf(blocks);
      // The turn's thinking blocks, sent back as the API asks in tool loops: for templates that print past thoughts.
      const thought = blocks.flatMap((block) => (block.type === "thinking" ? [block.thinking] : [])).join("\n");
      const reasoning = thought === "" ? {} : { reasoning: thought };
      result.push(
        toolCalls.length > 0 ? { role: "assistant", content, toolCalls, ...reasoning } : { role: "assistant", content, ...reasoning },
      );
      continue;
    }
    for (const { block, i, j } of turn.blocks) {
      if (block.type === "tool_use") throw misplaced(i, j, "tool_use", "assistant");
      if (block.type !== "tool_result") continue;
      const param = formatParam(["messages", i, "content", j, "tool_use_id"]);
      if (!answerable.has(block.tool_use_id)) {
        throw new ServerError("invalid_request", {
          param,
          message: `Invalid value for '${param}': no tool_use block with id '${block.tool_use_id}' is in the assistant message just before.`,
        });
      }
      answerable.delete(block.tool_use_id);
      const content = typeof block.content === "string" ? block.content : textOf(block.content ?? []);
      result.push({
        role: "tool",
        toolCallId: block.tool_use_id,
        content: checkJsonDepth(content, formatParam(["messages", i, "content", j, "content"])),
      });
    }
    answerable = new Set();
    // The turn's text and images; a tool result's images are shown in it, first (a tool message holds text).
    const parts = turn.blocks.flatMap(({ block, i, j }): ContentPart[] => {
      const param = formatParam(["messages", i, "content", j]);
      if (block.type === "text") return [{ text: block.text }];
      if (block.type === "image") return [{ image: toImage(block, `${param}.source`) }];
      if (block.type !== "tool_result" || !Array.isArray(block.content)) return [];
      return block.content.flatMap((part, k) => (part.type === "image" ? [{ image: toImage(part, `${param}.content[${k}].source`) }] : []));
    });
    const message = joinContentParts(parts);
    // A turn of tool results only has no text of its own.
    if (message.content !== "" || message.images || !blocks.some((block) => block.type === "tool_result")) {
      result.push({ role: "user", ...message });
    }
  }
  return result;
}

/** A block checked against its own type's schema; types this server cannot serve are refused by name. */
function toBlock(block: { type: string }, path: Array<string | number>, body: unknown): WireContentBlock {
  const param = formatParam(path);
  if (!(contentBlockTypes as readonly string[]).includes(block.type)) {
    throw new ServerError("invalid_request", {
      param: `${param}.type`,
      message: `Invalid value for '${param}.type': content blocks of type '${block.type}' are not supported; ${contentBlockTypes.map((type) => `'${type}'`).join(", ")} are.`,
    });
  }
  const schema = contentBlockSchemas[block.type as keyof typeof contentBlockSchemas];
  const parsed = schema.safeParse(block);
  if (!parsed.success) {
    throw toInvalidRequestError(new z.ZodError(parsed.error.issues.map((issue) => ({ ...issue, path: [...path, ...issue.path] }))), body);
  }
  return parsed.data as WireContentBlock;
}

/** Text blocks read as separate paragraphs; earlier thoughts are not shown to the model again. */
function textOf(blocks: ReadonlyArray<{ type: string; text?: string }>): string {
  return blocks
    .filter((block) => block.type === "text")
    .map((block) => block.text ?? "")
    .join("\n");
}

function toImage(block: WireContentBlock & { type: "image" }, param: string): Omit<MessageImage, "at"> {
  const { source } = block;
  return source.type === "base64"
    ? { param: `${param}.data`, source: { type: "base64", data: source.data, mediaType: source.media_type } }
    : { param: `${param}.url`, source: { type: "url", url: source.url } };
}

function misplaced(i: number, j: number, type: string, role: string): ServerError {
  const param = `messages[${i}].content[${j}]`;
  return new ServerError("invalid_request", {
    param,
    message: `Invalid value for '${param}': '${type}' blocks belong in ${role} messages.`,
  });
}

function toTools(wire: NonNullable<CountTokensRequestBody["tools"]>, body: unknown): ToolDefinition[] {
  const seen = new Set<string>();
  return wire.map((raw, i) => {
    const param = `tools[${i}]`;
    if (raw.type != null && raw.type !== "custom") {
      throw new ServerError("invalid_request", {
        param: `${param}.type`,
        message: `Invalid value for '${param}.type': server tools ('${raw.type}') are not supported; only custom tools ({name, description, input_schema}) are.`,
      });
    }
    const parsed = customToolSchema.safeParse(raw);
    if (!parsed.success) {
      throw toInvalidRequestError(
        new z.ZodError(parsed.error.issues.map((issue) => ({ ...issue, path: ["tools", i, ...issue.path] }))),
        body,
      );
    }
    const tool = parsed.data;
    if (seen.has(tool.name)) {
      throw new ServerError("invalid_request", {
        param: `${param}.name`,
        message: `Invalid value for '${param}.name': another tool is already named '${tool.name}'.`,
      });
    }
    seen.add(tool.name);
    if (tool.input_schema.type !== "object") {
      throw new ServerError("invalid_request", {
        param: `${param}.input_schema.type`,
        message: `Invalid schema for tool '${tool.name}': the input_schema must be a JSON Schema with "type": "object".`,
      });
    }
    checkSchema(tool.input_schema, `${param}.input_schema`, `tool '${tool.name}'`);
    return { name: tool.name, ...(tool.description === undefined ? {} : { description: tool.description }), parameters: tool.input_schema };
  });
}

/**
 * auto → auto, any → at least one call, tool → that tool, none → no call (and no tools shown);
 * without tool_choice: auto when there are tools. `disable_parallel_tool_use` allows one call.
 */
function toToolChoice(wire: WireToolChoice | undefined, tools: ToolDefinition[]): { toolChoice: ToolChoice; parallelToolCalls: boolean } {
  const parallelToolCalls = !(wire !== undefined && wire.type !== "none" && wire.disable_parallel_tool_use === true);
  if (wire === undefined) return { toolChoice: { type: tools.length > 0 ? "auto" : "none" }, parallelToolCalls };
  if ((wire.type === "any" || wire.type === "tool") && tools.length === 0) {
    throw new ServerError("invalid_request", {
      param: "tool_choice",
      message: `Invalid value for 'tool_choice': {"type": "${wire.type}"} needs 'tools'.`,
    });
  }
  switch (wire.type) {
    case "auto":
      return { toolChoice: { type: tools.length > 0 ? "auto" : "none" }, parallelToolCalls };
    case "any":
      return { toolChoice: { type: "required" }, parallelToolCalls };
    case "none":
      return { toolChoice: { type: "none" }, parallelToolCalls };
    case "tool":
      if (!tools.some((tool) => tool.name === wire.name)) {
        throw new ServerError("invalid_request", {
          param: "tool_choice.name",
          message: `Invalid value for 'tool_choice.name': no tool named '${wire.name}' is in 'tools'.`,
        });
      }
      return { toolChoice: { type: "function", name: wire.name }, parallelToolCalls };
    default:
      return wire satisfies never;
  }
}

function toResponseFormat(format: { schema: Record<string, unknown> } | null | undefined): ResponseFormat {
  if (!format) return { type: "text" };
  checkSchema(format.schema, "output_config.format.schema", "output_config.format");
  return { type: "json_schema", name: "output", schema: format.schema };
}
