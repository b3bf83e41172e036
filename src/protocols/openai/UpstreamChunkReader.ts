import type { ChatEvent, FinishReason, TokenAlternative, TokenLogprob, Usage } from "../../core/ChatEvent.js";

/** A token's log-probability as chat completions stream it (llama-server's completions too). */
interface UpstreamTokenLogprob {
  token?: string;
  logprob?: number;
  bytes?: number[] | null;
  top_logprobs?: UpstreamTokenLogprob[];
}

/** The parts of a streamed chat-completions (or legacy completions) chunk an upstream sends that are read here. */
interface UpstreamChunk {
  choices?: Array<{
    index?: number;
    delta?: {
      content?: string | null;
      /** The thought: llama-server's and vLLM's field (`reasoning` in vLLM's newer versions). */
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: Array<{ index?: number; function?: { name?: string | null; arguments?: string | null } }> | null;
    };
    /** Legacy completions' text. */
    text?: string | null;
    /**
     * Chat's shape (`content`), or legacy completions' (vLLM's: parallel arrays, each position's
     * alternatives as an object from token to log-probability).
     */
    logprobs?: {
      content?: UpstreamTokenLogprob[] | null;
      tokens?: string[];
      token_logprobs?: Array<number | null>;
      top_logprobs?: Array<Record<string, number> | null> | null;
    } | null;
    finish_reason?: string | null;
  }>;
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
    completion_tokens_details?: { reasoning_tokens?: number } | null;
  } | null;
}

/**
 * Turns an upstream's streamed chat-completions chunks (choice 0) into the engine's events, the
 * inverse of ChatCompletionStream: the thought (`reasoning_content`), the text (a legacy
 * completion's `text` too) with its logprobs when asked for, each tool call's start and argument
 * pieces, then `done` with the upstream's own usage, which limits and the ledger settle to. A
 * stream that ends without a finish reason, or without usage, is the upstream's fault: `finish`
 * says so rather than guessing counts; text without the logprobs asked for is refused
 * (UpstreamLogprobsMissing) rather than passed on without them.
 */
export class UpstreamChunkReader {
  readonly #now: () => number;
  readonly #started: number;
  #firstAt: number | undefined;
  #finishReason: FinishReason | undefined;
  #usage: Usage | undefined;
  readonly #calls = new Set<number>();

  readonly #logprobs: boolean;

  constructor(options: { logprobs?: boolean; now?: () => number } = {}) {
    this.#now = options.now ?? (() => performance.now());
    this.#started = this.#now();
    this.#logprobs = options.logprobs ?? false;
  }

  /** The events one chunk carries (its JSON, parsed). */
  read(chunk: unknown): ChatEvent[] {
    const { choices, usage } = (chunk ?? {}) as UpstreamChunk;
    const events: ChatEvent[] = [];
    const choice = choices?.find((each) => (each.index ?? 0) === 0);
    const delta = choice?.delta;
    const thought = delta?.reasoning_content ?? delta?.reasoning;
    if (thought) events.push({ type: "thinking", text: thought });
    const text = delta?.content ?? choice?.text;
    if (text) {
      if (!this.#logprobs) events.push({ type: "text", text });
      else {
        const logprobs = logprobsOf(choice?.logprobs);
        if (!logprobs) throw new UpstreamLogprobsMissing("the upstream's text came without the logprobs asked for");
        events.push({ type: "text", text, logprobs });
      }
    }
    for (const call of delta?.tool_calls ?? []) {
      const index = call.index ?? 0;
      const name = call.function?.name;
      if (!this.#calls.has(index) && name) {
        this.#calls.add(index);
        events.push({ type: "tool_call_start", index, name });
      }
      const piece = call.function?.arguments;
      if (piece && this.#calls.has(index)) events.push({ type: "tool_call_arguments", index, text: piece });
    }
    if (events.length > 0) this.#firstAt ??= this.#now();
    if (choice?.finish_reason) this.#finishReason = finishReasonOf(choice.finish_reason, this.#calls.size > 0);
    if (usage && typeof usage.prompt_tokens === "number" && typeof usage.completion_tokens === "number") {
      const reasoning = usage.completion_tokens_details?.reasoning_tokens;
      this.#usage = {
        promptTokens: usage.prompt_tokens,
        cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
        completionTokens: usage.completion_tokens,
        ...(typeof reasoning === "number" ? { reasoningTokens: reasoning } : {}),
      };
    }
    return events;
  }

  /** The `done` event once the stream has ended; throws, naming what is missing, if it ended short. */
  finish(): ChatEvent & { type: "done" } {
    if (this.#finishReason === undefined) throw new Error("the upstream's stream ended before its finish reason");
    if (this.#usage === undefined) throw new UpstreamUsageMissing("the upstream's stream carried no usage (stream_options.include_usage)");
    const ended = this.#now();
    const first = this.#firstAt ?? ended;
    return {
      type: "done",
      finishReason: this.#finishReason,
      usage: this.#usage,
      timings: { loadMs: 0, promptMs: first - this.#started, generationMs: ended - first },
    };
  }
}

/** An upstream's stream that ended without usage: its token counts are not guessed at. */
export class UpstreamUsageMissing extends Error {}

/** An upstream that streams text without the logprobs the request asked for: the client's request cannot be served there. */
export class UpstreamLogprobsMissing extends Error {}

/** A chunk's logprobs in either shape, as the engine's; undefined when it has none. */
function logprobsOf(logprobs: NonNullable<UpstreamChunk["choices"]>[number]["logprobs"]): TokenLogprob[] | undefined {
  if (logprobs?.content)
    return logprobs.content.map((token) => ({ ...alternative(token), top: (token.top_logprobs ?? []).map(alternative) }));
  const { tokens, token_logprobs: values, top_logprobs: tops } = logprobs ?? {};
  if (!tokens || !values) return undefined;
  return tokens.map((token, i) => ({
    ...alternative({ token, logprob: values[i] ?? -Infinity }),
    top: Object.entries(tops?.[i] ?? {}).map(([top, logprob]) => alternative({ token: top, logprob })),
  }));
}

/** One alternative; a server that sends no bytes (vLLM's legacy shape) gives its token's UTF-8. */
function alternative(token: UpstreamTokenLogprob): TokenAlternative {
  const text = token.token ?? "";
  return { token: text, bytes: token.bytes ?? [...Buffer.from(text, "utf8")], logprob: token.logprob ?? -Infinity };
}

/** OpenAI's finish reasons as the engine's: a reply that made calls ended for them whatever the upstream says. */
function finishReasonOf(reason: string, madeCalls: boolean): FinishReason {
  if (reason === "length") return "length";
  if (reason === "tool_calls" || reason === "function_call" || madeCalls) return "tool_calls";
  return "stop";
}
