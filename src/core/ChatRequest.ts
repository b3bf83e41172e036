import type { ImageInput } from "./images.js";

/** A conversation turn as the engine sees it: protocol-neutral and already validated. */
export type ChatMessage =
  | { role: "system"; content: string }
  | {
      role: "user";
      content: string;
      /** Images the message shows, in order, each where it stands in the text (a vision model's only). */
      images?: readonly MessageImage[];
    }
  | {
      role: "assistant";
      content: string;
      toolCalls?: ToolCall[];
      /** The thought the reply began with, for templates that print it. */ reasoning?: string;
    }
  | { role: "tool"; content: string; toolCallId: string };

/**
 * An image in a user message. The wire formats place it among the message's text parts; here it is
 * where it stands in `content`, so every reader of the text alone (counting, logging, templates of
 * text models) reads the text as it is.
 */
export interface MessageImage {
  /** Its place in the message's `content`: a UTF-16 offset (0: before all the text). */
  at: number;
  /** The request field it came from (`messages[0].content[1]`), which an error about it names. */
  param: string;
  source: ImageSource;
}

/**
 * An image as the client gave it: base64 bytes (a data URL's or a bare field's, with the media type
 * the client declared, if any) or a URL to fetch; `checked` once the server has its bytes and
 * checked them (core/images.ts checkImage), the only kind the engine takes.
 */
export type ImageSource =
  { type: "base64"; data: string; mediaType?: string } | { type: "url"; url: string } | { type: "checked"; image: ImageInput };

export interface ToolCall {
  id: string;
  name: string;
  /** JSON-encoded arguments, exactly as the model wrote them. */
  arguments: string;
}

/** A function the model may call; `parameters` is a JSON Schema for its arguments object. */
export interface ToolDefinition {
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

/**
 * auto: the model decides; none: no call; required: at least one call; function: exactly that
 * function. "required" and "function" are enforced by grammar-constrained decoding.
 */
export type ToolChoice = { type: "auto" } | { type: "none" } | { type: "required" } | { type: "function"; name: string };

/** The shape of the reply's text: free, any JSON object, or JSON valid against a schema. */
export type ResponseFormat =
  { type: "text" } | { type: "json_object" } | { type: "json_schema"; name: string; schema: Record<string, unknown> | boolean };

export interface SamplingOptions {
  /** 0 means greedy decoding: deterministic, whatever the seed. */
  temperature: number;
  topP: number;
  seed?: number;
  /** Additive logit penalties over the tokens generated so far (OpenAI semantics, -2..2). */
  presencePenalty: number;
  frequencyPenalty: number;
  /** Token id → value added to its logit before sampling; -100 bans the token (OpenAI semantics). */
  logitBias: ReadonlyMap<number, number>;
  /** Sample from the k most likely tokens only (default 40, as llama-server and Ollama); 0 disables. */
  topK?: number;
  /** Drop tokens less likely than this fraction of the most likely one (0..1; default 0, off). */
  minP?: number;
  /** Multiplicative penalty on recently generated tokens (llama.cpp semantics; 1, the default, is off). */
  repeatPenalty?: number;
  /** How many recent generated tokens the penalties look at (default 256; 0 turns them off; Infinity: all). */
  penaltyWindow?: number;
}

/**
 * A prompt given as is instead of a conversation: `raw` text is tokenized with its special tokens
 * and no template; `tokens` are the model's token ids, used as they are; `infill` asks a
 * fill-in-the-middle model for what goes between prefix and suffix.
 */
export type PromptOverride =
  { type: "raw"; text: string } | { type: "tokens"; tokens: readonly number[] } | { type: "infill"; prefix: string; suffix: string };

/** The effort levels templates know (gpt-oss's harmony prompt: "Reasoning: low|medium|high"). */
export type ReasoningEffort = "low" | "medium" | "high";

/**
 * A wire's thinking level as a ChatRequest takes it: "none" turns thinking off; a level is passed to
 * templates that read one (levels beyond their three taken as the nearest), and leaves thinking as
 * the template has it, as transformers passes `reasoning_effort` alone.
 */
export function thinkingOf(level: string): Pick<ChatRequest, "thinking" | "reasoningEffort"> {
  switch (level) {
    case "none":
      return { thinking: false };
    case "minimal":
    case "low":
      return { reasoningEffort: "low" };
    case "medium":
      return { reasoningEffort: "medium" };
    case "high":
    case "xhigh":
    case "max":
      return { reasoningEffort: "high" };
    default:
      return {};
  }
}

export interface ChatRequest {
  /** The id or alias the caller asked for; echoed back in replies. */
  model: string;
  messages: ChatMessage[];
  /** Upper bound on generated tokens; undefined means "until the context is full". */
  maxTokens?: number;
  /** Strings that end generation; none of them appears in the output. */
  stop: string[];
  sampling: SamplingOptions;
  tools: ToolDefinition[];
  toolChoice: ToolChoice;
  /** Whether one reply may hold several calls. */
  parallelToolCalls: boolean;
  responseFormat: ResponseFormat;
  /**
   * Whether a model whose template has a thought section may think before answering. undefined:
   * the template's default (these templates think unless told not to); false: the prompt tells it
   * not to where the template can (an empty thought section prefilled). true: think, as by default.
   * Models without a thought section ignore it.
   */
  thinking?: boolean;
  /**
   * How much to think, for templates that read `reasoning_effort` (gpt-oss); others ignore it.
   * undefined: the template's default.
   */
  reasoningEffort?: ReasoningEffort;
  /**
   * The last message is the start of the reply (a prefill, as Anthropic's final assistant turn):
   * when it is an assistant message without tool calls, its turn is left open in the prompt, the
   * model continues its text, and the reply holds only the continuation. Such a reply is all
   * answer: no thought section is opened or split from it. Otherwise, or unset, the model answers
   * in a turn of its own.
   */
  continueLastMessage?: boolean;
  /** When set, the prompt is this and `messages` is not rendered. */
  prompt?: PromptOverride;
  /**
   * Report each generated token's log-probability and the `top` most likely tokens at its
   * position (0-20). Absent: nothing is computed (generation costs what it did without).
   */
  logprobs?: { top: number };
  /** How many choices to generate from the one prompt (1-8; default 1): see Engine.chatChoices. */
  n?: number;
  /**
   * The client's own name for what its requests share (OpenAI's `prompt_cache_key`: a conversation,
   * a user): a gateway sends requests with the same key to the same upstream, which holds their
   * prompt cache. Absent, the conversation's start stands for it.
   */
  promptCacheKey?: string;
  /**
   * Legacy completions' `echo`: each choice's first text event is the prompt override's text (the
   * prefix, for infill; token ids detokenized with their special tokens), then the completion.
   */
  echo?: boolean;
  /**
   * The LoRA adapters to apply, as llama-server's `lora` field gives them: ids into the model's
   * declared adapters (ModelInfo.adapters) with their scales; adapters not listed are off. Absent,
   * the model name's own apply (`base+adapter`), or none.
   */
  lora?: AdapterChoice[];
}

/** One LoRA adapter of a model, by its index among the model's declared adapters, and its scale (0: off). */
export interface AdapterChoice {
  id: number;
  scale: number;
}

/**
 * The seed of choice `index`: the request's own for the first (so n=1 replies as before), and for
 * the others one derived from it (golden-ratio steps, as a uint32), so choices are reproducible
 * but differ. Without a seed every choice's sampler seeds itself at random.
 */
export function choiceSeed(seed: number | undefined, index: number): number | undefined {
  if (seed === undefined || index === 0) return seed;
  return (seed + Math.imul(index, 0x9e3779b9)) >>> 0;
}
