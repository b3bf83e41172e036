import type { ChatMessage, ChatRequest, ResponseFormat, ToolChoice, ToolDefinition } from "../../core/ChatRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { checkSchemaBudget } from "../../core/checkRequestSchemas.js";
import { checkJsonDepth, checkSchema } from "../checkSchema.js";
import { toInvalidRequestError } from "../toInvalidRequestError.js";
import { chatCompletionRequestSchema, type ChatCompletionRequestBody, type WireChatMessage } from "./schemas.js";

export interface ParsedChatCompletionRequest {
  chat: ChatRequest;
  stream: boolean;
  includeUsage: boolean;
}

/** Validates a chat-completions body and translates it to the engine's request. */
export function fromChatCompletionRequest(body: unknown): ParsedChatCompletionRequest {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ServerError("invalid_request", { message: "The request body must be a JSON object." });
  }
  const parsed = chatCompletionRequestSchema.safeParse(body);
  if (!parsed.success) throw toInvalidRequestError(parsed.error, body);
  const wire = parsed.data;

  if (wire.n != null && wire.n !== 1) {
    throw new ServerError("invalid_request", { param: "n", message: "Only n=1 is supported: one choice per request." });
  }
  const stream = wire.stream === true;
  if (wire.stream_options != null && !stream) {
    throw new ServerError("invalid_request", {
      param: "stream_options",
      message: "The 'stream_options' parameter is only allowed when 'stream' is true.",
    });
  }

  const format = wire.response_format?.type === "json_schema" ? [wire.response_format.json_schema.schema] : [];
  checkSchemaBudget([...(wire.tools ?? []).map((tool) => tool.function.parameters), ...format], wire.tools?.length ? "tools" : "response_format");
  const tools = toTools(wire.tools ?? []);
  const stop = wire.stop == null ? [] : typeof wire.stop === "string" ? [wire.stop] : wire.stop;
  if (stop.includes("")) throw new ServerError("invalid_request", { param: "stop", message: "Invalid value for 'stop': stop sequences must not be empty." });

  return {
    chat: {
      model: wire.model,
      messages: toMessages(wire.messages),
      // max_completion_tokens supersedes the deprecated max_tokens when both are sent.
      maxTokens: wire.max_completion_tokens ?? wire.max_tokens ?? undefined,
      stop,
      sampling: {
        // OpenAI's defaults: temperature 1 and top_p 1 when the caller sends none.
        temperature: wire.temperature ?? 1,
        topP: wire.top_p ?? 1,
        seed: wire.seed ?? undefined,
        presencePenalty: wire.presence_penalty ?? 0,
        frequencyPenalty: wire.frequency_penalty ?? 0,
        logitBias: new Map(Object.entries(wire.logit_bias ?? {}).map(([token, bias]) => [Number(token), bias])),
      },
      tools,
      toolChoice: toToolChoice(wire.tool_choice, tools),
      parallelToolCalls: wire.parallel_tool_calls ?? true,
      responseFormat: toResponseFormat(wire.response_format),
    },
    stream,
    includeUsage: stream && wire.stream_options?.include_usage === true,
  };
}

function toMessages(messages: WireChatMessage[]): ChatMessage[] {
  const answerable = new Set<string>();
  return messages.map((message, i): ChatMessage => {
    switch (message.role) {
      case "system":
      case "developer":
        answerable.clear();
        return { role: "system", content: toText(message.content, i) };
      case "user":
        answerable.clear();
        return { role: "user", content: toText(message.content, i) };
      case "assistant": {
        answerable.clear();
        const toolCalls = message.tool_calls?.map((call, j) => ({
          id: call.id,
          name: call.function.name,
          arguments: checkJsonDepth(call.function.arguments, `messages[${i}].tool_calls[${j}].function.arguments`),
        }));
        for (const call of toolCalls ?? []) answerable.add(call.id);
        if (message.content == null && !toolCalls?.length) {
          throw new ServerError("invalid_request", {
            param: `messages[${i}].content`,
            message: `Invalid value for 'messages[${i}].content': an assistant message needs content or tool_calls.`,
          });
        }
        const content = message.content == null ? "" : toText(message.content, i);
        return toolCalls?.length ? { role: "assistant", content, toolCalls } : { role: "assistant", content };
      }
      case "tool":
        // A tool result must answer a call made by the assistant turn just before it.
        if (!answerable.has(message.tool_call_id)) {
          throw new ServerError("invalid_request", {
            param: `messages[${i}].tool_call_id`,
            message: `Invalid value for 'messages[${i}].tool_call_id': no preceding assistant message has a tool call with id '${message.tool_call_id}'.`,
          });
        }
        answerable.delete(message.tool_call_id);
        return { role: "tool", content: checkJsonDepth(toText(message.content, i), `messages[${i}].content`), toolCallId: message.tool_call_id };
      default:
        return message satisfies never;
    }
  });
}

function toText(content: string | Array<{ type: string }>, messageIndex: number): string {
  if (typeof content === "string") return content;
  return content
    .map((part, j) => {
      const param = `messages[${messageIndex}].content[${j}]`;
      if (part.type !== "text") {
        throw new ServerError("invalid_request", {
          param: `${param}.type`,
          message: `Invalid value for '${param}.type': content parts of type '${part.type}' are not supported; only 'text' is.`,
        });
      }
      const text = (part as { text?: unknown }).text;
      if (typeof text !== "string") {
        throw new ServerError("invalid_request", { param: `${param}.text`, message: `Missing required parameter: '${param}.text'.` });
      }
      return text;
    })
    // Several text parts read as separate paragraphs, as vLLM joins them.
    .join("\n");
}

function toTools(wire: NonNullable<ChatCompletionRequestBody["tools"]>): ToolDefinition[] {
  const seen = new Set<string>();
  return wire.map(({ function: fn }, i) => {
    const param = `tools[${i}].function`;
    if (seen.has(fn.name)) {
      throw new ServerError("invalid_request", {
        param: `${param}.name`,
        message: `Invalid value for '${param}.name': another tool is already named '${fn.name}'.`,
      });
    }
    seen.add(fn.name);
    // OpenAI: "Omitting parameters defines a function with an empty parameter list."
    const parameters = fn.parameters ?? { type: "object", properties: {} };
    if (parameters.type !== "object") {
      throw new ServerError("invalid_request", {
        param: `${param}.parameters.type`,
        message: `Invalid schema for function '${fn.name}': the parameters must be a JSON Schema with "type": "object".`,
      });
    }
    checkSchema(parameters, `${param}.parameters`, `function '${fn.name}'`);
    return { name: fn.name, ...(fn.description === undefined ? {} : { description: fn.description }), parameters };
  });
}

function toToolChoice(wire: ChatCompletionRequestBody["tool_choice"], tools: ToolDefinition[]): ToolChoice {
  // OpenAI's default: "none" without tools, "auto" with them.
  if (wire == null) return { type: tools.length > 0 ? "auto" : "none" };
  if ((wire === "required" || typeof wire === "object") && tools.length === 0) {
    throw new ServerError("invalid_request", {
      param: "tool_choice",
      message: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
    });
  }
  if (typeof wire === "string") return { type: wire };
  const { name } = wire.function;
  if (!tools.some((tool) => tool.name === name)) {
    throw new ServerError("invalid_request", {
      param: "tool_choice.function.name",
      message: `Invalid value for 'tool_choice.function.name': no tool named '${name}' is in 'tools'.`,
    });
  }
  return { type: "function", name };
}

function toResponseFormat(wire: ChatCompletionRequestBody["response_format"]): ResponseFormat {
  if (wire == null || wire.type === "text") return { type: "text" };
  if (wire.type === "json_object") return { type: "json_object" };
  const { name, schema } = wire.json_schema;
  if (schema === undefined) return { type: "json_object" };
  checkSchema(schema, "response_format.json_schema.schema", `response format '${name}'`);
  return { type: "json_schema", name, schema };
}
