import type { ChatMessage, ChatRequest, ResponseFormat, ToolChoice } from "../../core/ChatRequest.js";
import { IMAGE_MIME_TYPES } from "../../core/images.js";
import { ServerError } from "../../core/ServerError.js";

/**
 * An engine request as a chat-completions body for an OpenAI-compatible upstream (vLLM,
 * llama-server, SGLang, Ollama's /v1, another modelhost): the inverse of fromChatCompletionRequest.
 * Always streamed, with usage in the last chunk (`stream_options.include_usage`): the upstream's
 * own token counts are what limits and the ledger settle to. Fields only some servers read
 * (top_k, min_p, repeat_penalty: llama-server's and vLLM's extensions) are sent only when the
 * request sets them away from their defaults, so a server that knows none of them still serves
 * the plain request. `model`: the upstream's name for the model.
 */
export function toUpstreamChatRequest(request: ChatRequest, model: string): Record<string, unknown> {
  if (request.prompt) {
    throw new ServerError("invalid_request", {
      param: "prompt",
      message: `The model \`${request.model}\` is served by an upstream server through its chat completions: a prompt given as is (raw, token ids, fill-in-the-middle) cannot be sent there.`,
    });
  }
  const { sampling } = request;
  const body: Record<string, unknown> = {
    model,
    messages: request.messages.map(toWireMessage),
    stream: true,
    stream_options: { include_usage: true },
    temperature: sampling.temperature,
    top_p: sampling.topP,
    ...(sampling.seed === undefined ? {} : { seed: sampling.seed }),
    ...(sampling.presencePenalty !== 0 ? { presence_penalty: sampling.presencePenalty } : {}),
    ...(sampling.frequencyPenalty !== 0 ? { frequency_penalty: sampling.frequencyPenalty } : {}),
    ...(sampling.logitBias.size > 0 ? { logit_bias: Object.fromEntries(sampling.logitBias) } : {}),
    ...(sampling.topK !== undefined ? { top_k: sampling.topK } : {}),
    ...(sampling.minP !== undefined && sampling.minP > 0 ? { min_p: sampling.minP } : {}),
    ...(sampling.repeatPenalty !== undefined && sampling.repeatPenalty !== 1 ? { repeat_penalty: sampling.repeatPenalty } : {}),
    ...(request.maxTokens === undefined ? {} : { max_tokens: request.maxTokens }),
    ...(request.stop.length > 0 ? { stop: request.stop } : {}),
    ...(request.n !== undefined && request.n !== 1 ? { n: request.n } : {}),
    ...(request.logprobs ? { logprobs: true, top_logprobs: request.logprobs.top } : {}),
    ...(request.reasoningEffort === undefined ? {} : { reasoning_effort: request.reasoningEffort }),
    // Thinking off, as llama-server and vLLM take it: the template's own switch.
    ...(request.thinking === false ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    ...toolFields(request),
    ...responseFormatField(request.responseFormat),
  };
  return body;
}

function toWireMessage(message: ChatMessage): Record<string, unknown> {
  switch (message.role) {
    case "system":
      return { role: "system", content: message.content };
    case "user":
      return { role: "user", content: message.images?.length ? userParts(message) : message.content };
    case "assistant":
      return {
        role: "assistant",
        content: message.content,
        ...(message.toolCalls?.length
          ? {
              tool_calls: message.toolCalls.map((call) => ({
                id: call.id,
                type: "function",
                function: { name: call.name, arguments: call.arguments },
              })),
            }
          : {}),
        ...(message.reasoning === undefined ? {} : { reasoning_content: message.reasoning }),
      };
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
    default:
      return message satisfies never;
  }
}

/** A user message's text cut at its images into text and image_url parts (data: URLs of the checked bytes). */
function userParts(message: ChatMessage & { role: "user" }): Array<Record<string, unknown>> {
  const parts: Array<Record<string, unknown>> = [];
  let from = 0;
  const text = (end: number) => {
    if (end > from) parts.push({ type: "text", text: message.content.slice(from, end) });
    from = end;
  };
  for (const image of [...(message.images ?? [])].sort((a, b) => a.at - b.at)) {
    text(image.at);
    if (image.source.type !== "checked") throw new Error("An image reached the engine unchecked (see http/imageInput.ts).");
    const { bytes, format } = image.source.image;
    parts.push({
      type: "image_url",
      image_url: { url: `data:${IMAGE_MIME_TYPES[format]};base64,${Buffer.from(bytes).toString("base64")}` },
    });
  }
  text(message.content.length);
  return parts;
}

function toolFields(request: ChatRequest): Record<string, unknown> {
  if (request.tools.length === 0) return {};
  return {
    tools: request.tools.map((tool) => ({
      type: "function",
      function: {
        name: tool.name,
        ...(tool.description === undefined ? {} : { description: tool.description }),
        parameters: tool.parameters,
      },
    })),
    tool_choice: toolChoice(request.toolChoice),
    parallel_tool_calls: request.parallelToolCalls,
  };
}

function toolChoice(choice: ToolChoice): unknown {
  switch (choice.type) {
    case "auto":
    case "none":
    case "required":
      return choice.type;
    case "function":
      return { type: "function", function: { name: choice.name } };
    default:
      return choice satisfies never;
  }
}

function responseFormatField(format: ResponseFormat): Record<string, unknown> {
  switch (format.type) {
    case "text":
      return {};
    case "json_object":
      return { response_format: { type: "json_object" } };
    case "json_schema":
      return { response_format: { type: "json_schema", json_schema: { name: format.name, schema: format.schema } } };
    default:
      return format satisfies never;
  }
}
