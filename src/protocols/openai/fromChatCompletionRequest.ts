import { thinkingOf, type ChatMessage, type ChatRequest, type MessageImage, type ResponseFormat } from "../../core/ChatRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { checkSchemaBudget } from "../../core/checkRequestSchemas.js";
import { checkJsonDepth } from "../checkSchema.js";
import { parseBody } from "../parseBody.js";
import { joinContentParts, type ContentPart } from "../contentParts.js";
import { commonRequestFields } from "./commonRequestFields.js";
import { toJsonSchemaFormat, toToolChoice, toToolDefinitions } from "../toolDefinitions.js";
import { chatCompletionRequestSchema, type ChatCompletionRequestBody, type WireChatMessage } from "./schemas.js";

export interface ParsedChatCompletionRequest {
  chat: ChatRequest;
  stream: boolean;
  includeUsage: boolean;
}

/** Validates a chat-completions body and translates it to the engine's request. */
export function fromChatCompletionRequest(body: unknown): ParsedChatCompletionRequest {
  const wire = parseBody(chatCompletionRequestSchema, body);

  if (wire.top_logprobs != null && wire.logprobs !== true) {
    throw new ServerError("invalid_request", {
      param: "top_logprobs",
      message: "Invalid value for 'top_logprobs': 'logprobs' must be set to true if 'top_logprobs' is used.",
    });
  }
  const { stream, includeUsage, stop, sampling, adapters } = commonRequestFields(wire);

  const format = wire.response_format?.type === "json_schema" ? [wire.response_format.json_schema.schema] : [];
  checkSchemaBudget(
    [...(wire.tools ?? []).map((tool) => tool.function.parameters), ...format],
    wire.tools?.length ? "tools" : "response_format",
  );
  const tools = toToolDefinitions(
    (wire.tools ?? []).map((tool) => tool.function),
    (i) => `tools[${i}].function`,
  );

  return {
    chat: {
      model: wire.model,
      messages: toMessages(wire.messages),
      // max_completion_tokens supersedes the deprecated max_tokens when both are sent.
      maxTokens: wire.max_completion_tokens ?? wire.max_tokens ?? undefined,
      stop,
      sampling,
      ...adapters,
      tools,
      toolChoice: toToolChoice(
        typeof wire.tool_choice === "object" && wire.tool_choice ? wire.tool_choice.function : wire.tool_choice,
        tools,
        "tool_choice.function.name",
      ),
      parallelToolCalls: wire.parallel_tool_calls ?? true,
      responseFormat: toResponseFormat(wire.response_format),
      // Models without a thought section ignore both; reasoning_effort "none" wins over enable_thinking.
      ...(typeof wire.chat_template_kwargs?.enable_thinking === "boolean" ? { thinking: wire.chat_template_kwargs.enable_thinking } : {}),
      ...(wire.reasoning_effort == null ? {} : thinkingOf(wire.reasoning_effort)),
      ...(wire.continue_final_message === true ? { continueLastMessage: true } : {}),
      ...(wire.prompt_cache_key ? { promptCacheKey: wire.prompt_cache_key } : {}),
      ...(wire.logprobs === true ? { logprobs: { top: wire.top_logprobs ?? 0 } } : {}),
      n: wire.n ?? 1,
    },
    stream,
    includeUsage,
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
        return { role: "user", ...toUserContent(message.content, i) };
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
        // Templates that keep past thoughts (gpt-oss's analysis before a call, DeepSeek's) print it.
        const reasoning = message.reasoning_content ? { reasoning: message.reasoning_content } : {};
        return toolCalls?.length ? { role: "assistant", content, toolCalls, ...reasoning } : { role: "assistant", content, ...reasoning };
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
        return {
          role: "tool",
          content: checkJsonDepth(toText(message.content, i), `messages[${i}].content`),
          toolCallId: message.tool_call_id,
        };
      default:
        return message satisfies never;
    }
  });
}

/** A user message's text and images: text and image_url parts. */
function toUserContent(content: string | Array<{ type: string }>, messageIndex: number): { content: string; images?: MessageImage[] } {
  if (typeof content === "string") return { content };
  return joinContentParts(
    content.map((part, j): ContentPart => {
      const param = `messages[${messageIndex}].content[${j}]`;
      if (part.type !== "image_url") return { text: textOfPart(part, param, ["text", "image_url"]) };
      const url = (part as { image_url?: unknown }).image_url;
      const href = typeof url === "string" ? url : typeof url === "object" && url !== null ? (url as { url?: unknown }).url : undefined;
      if (typeof href !== "string" || href === "") {
        throw new ServerError("invalid_request", {
          param: `${param}.image_url.url`,
          message: `Missing required parameter: '${param}.image_url.url'.`,
        });
      }
      return { image: { param: `${param}.image_url.url`, source: { type: "url", url: href } } };
    }),
  );
}

function textOfPart(part: { type: string }, param: string, allowed: readonly string[]): string {
  if (part.type !== "text") {
    throw new ServerError("invalid_request", {
      param: `${param}.type`,
      message: `Invalid value for '${param}.type': content parts of type '${part.type}' are not supported here; ${allowed.map((type) => `'${type}'`).join(" and ")} are.`,
    });
  }
  const text = (part as { text?: unknown }).text;
  if (typeof text !== "string") {
    throw new ServerError("invalid_request", { param: `${param}.text`, message: `Missing required parameter: '${param}.text'.` });
  }
  return text;
}

function toText(content: string | Array<{ type: string }>, messageIndex: number): string {
  if (typeof content === "string") return content;
  return (
    content
      .map((part, j) => textOfPart(part, `messages[${messageIndex}].content[${j}]`, ["text"]))
      // Several text parts read as separate paragraphs, as vLLM joins them.
      .join("\n")
  );
}

function toResponseFormat(wire: ChatCompletionRequestBody["response_format"]): ResponseFormat {
  if (wire == null || wire.type === "text") return { type: "text" };
  if (wire.type === "json_object") return { type: "json_object" };
  const { name, schema } = wire.json_schema;
  if (schema === undefined) return { type: "json_object" };
  return toJsonSchemaFormat(name, schema, "response_format.json_schema.schema");
}
