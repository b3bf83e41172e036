/** A conversation turn as the engine sees it: protocol-neutral and already validated. */
export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  | { role: "tool"; content: string; toolCallId: string };

export type ChatRole = ChatMessage["role"];

export interface ToolCall {
  id: string;
  name: string;
  /** JSON-encoded arguments, exactly as the model wrote them. */
  arguments: string;
}

export interface SamplingOptions {
  /** 0 means greedy decoding: deterministic, whatever the seed. */
  temperature: number;
  topP: number;
  seed?: number;
  /** Additive logit penalties over the tokens generated so far (OpenAI semantics, -2..2). */
  presencePenalty: number;
  frequencyPenalty: number;
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
}
