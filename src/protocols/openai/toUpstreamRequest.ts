import type { ChatMessage, ChatRequest, ResponseFormat, ToolChoice } from "../../core/ChatRequest.js";
import type { EmbedRequest } from "../../core/EmbedRequest.js";
import { IMAGE_MIME_TYPES } from "../../core/images.js";
import type { RerankRequest } from "../../core/RerankRequest.js";
import { ServerError } from "../../core/ServerError.js";
import type { DetokenizeRequest, TokenizeRequest } from "../../core/TokenizeRequest.js";

// Engine requests as the bodies an OpenAI-compatible upstream reads (vLLM, llama-server, SGLang,
// Ollama's /v1, another modelhost): the inverses of the server's own translators. `model` is the
// upstream's name for the model. Each refuses, naming the field, what those servers cannot be sent.

/**
 * A chat request as a chat-completions body. Always streamed, with usage in the last chunk
 * (`stream_options.include_usage`): the upstream's own token counts are what limits and the ledger
 * settle to. Fields only some servers read (top_k, min_p, repeat_penalty: llama-server's and vLLM's
 * extensions) are sent only when the request sets them away from their defaults, so a server that
 * knows none of them still serves the plain request. One choice a request: n choices are n
 * requests (UpstreamEngine), which every server serves (llama-server has no `n`).
 */
export function toUpstreamChatRequest(request: ChatRequest, model: string): Record<string, unknown> {
  if (request.prompt) {
    throw new ServerError("invalid_request", {
      param: "prompt",
      message: `The model \`${request.model}\` is served by an upstream server: a prompt given as is goes to its completions, not its chat.`,
    });
  }
  const last = request.messages.at(-1);
  const prefill = request.continueLastMessage === true && last?.role === "assistant" && !last.toolCalls?.length;
  return {
    model,
    messages: request.messages.map(toWireMessage),
    ...generationFields(request),
    ...(request.reasoningEffort === undefined ? {} : { reasoning_effort: request.reasoningEffort }),
    // Thinking off, as llama-server and vLLM take it: the template's own switch.
    ...(request.thinking === false ? { chat_template_kwargs: { enable_thinking: false } } : {}),
    // A prefilled reply (Anthropic's last assistant turn), as vLLM and modelhost read it; llama-server
    // continues a final assistant message by itself.
    ...(prefill ? { continue_final_message: true, add_generation_prompt: false } : {}),
    ...toolFields(request),
    ...responseFormatField(request.responseFormat),
  };
}

/**
 * A prompt given as is as a legacy completions body: text, or token ids (vLLM, llama-server and
 * modelhost read both). Fill-in-the-middle has no common shape upstream (llama-server's /infill is
 * its own), and echo is the caller's to write (UpstreamEngine writes a text prompt back itself).
 */
export function toUpstreamCompletionRequest(request: ChatRequest, model: string): Record<string, unknown> {
  const prompt = request.prompt;
  if (!prompt) throw new Error("toUpstreamCompletionRequest: the request has no prompt override");
  if (prompt.type === "infill") {
    throw new ServerError("invalid_request", {
      param: "suffix",
      message: `The model \`${request.model}\` is served by an upstream server, whose completions have no fill-in-the-middle (suffix).`,
    });
  }
  return { model, prompt: prompt.type === "raw" ? prompt.text : prompt.tokens, ...generationFields(request) };
}

/** Sampling, length, stop and logprobs fields, the same in chat and legacy completions. */
function generationFields(request: ChatRequest): Record<string, unknown> {
  const { sampling } = request;
  return {
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
    // Chat's shape; a legacy completions body takes `logprobs: N` (vLLM) or this (llama-server, modelhost).
    ...(request.logprobs ? { logprobs: request.prompt ? request.logprobs.top : true, top_logprobs: request.logprobs.top } : {}),
    // The upstream's own adapter ids (llama-server's and modelhost's field; vLLM names adapters as models).
    ...(request.lora ? { lora: request.lora } : {}),
  };
}

/**
 * Inputs to embed as an embeddings body. Vectors come back as the upstream makes them and are cut to
 * `dimensions` here (not every server reads the field); raw, unnormalised vectors have no common
 * field, so they are refused rather than silently normalised.
 */
export function toUpstreamEmbeddingRequest(request: EmbedRequest, model: string): Record<string, unknown> {
  if (request.normalize === false) {
    throw new ServerError("invalid_request", {
      param: "normalize",
      message: `The model \`${request.model}\` is served by an upstream server, which returns normalised vectors only.`,
    });
  }
  return { model, input: request.inputs, encoding_format: "float" };
}

/** Documents to score, as the rerank body llama-server, vLLM and modelhost read (Jina's and Cohere's shape). */
export function toUpstreamRerankRequest(request: RerankRequest, model: string): Record<string, unknown> {
  return { model, query: request.query, documents: request.documents };
}

/**
 * Text to tokenize, for the server's root `/tokenize`: llama-server's fields (content, add_special,
 * parse_special, with_pieces, which modelhost reads too) and vLLM's (prompt, add_special_tokens),
 * each server ignoring the others'.
 */
export function toUpstreamTokenizeRequest(request: TokenizeRequest, model: string): Record<string, unknown> {
  return {
    model,
    content: request.content,
    prompt: request.content,
    add_special: request.addSpecial,
    add_special_tokens: request.addSpecial,
    parse_special: request.parseSpecial,
    with_pieces: request.withPieces,
  };
}

/** Token ids to turn back into text, for the server's root `/detokenize` (llama-server's, vLLM's and modelhost's). */
export function toUpstreamDetokenizeRequest(request: DetokenizeRequest, model: string): Record<string, unknown> {
  return { model, tokens: request.tokens };
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
