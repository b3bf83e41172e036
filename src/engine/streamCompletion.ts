import { randomInt } from "node:crypto";
import { LlamaGrammarEvaluationState, type LlamaGrammar, type LlamaModel, type Token } from "node-llama-cpp";
import type { ChatEvent, FinishReason, TokenAlternative, TokenLogprob } from "../core/ChatEvent.js";
import type { SamplingOptions } from "../core/ChatRequest.js";
import type { EngineCounters } from "../core/ModelInfo.js";
import { countedTokens, type BatchDecoder, type DecoderSequence, type Drafter, type PromptImages, type Sampled } from "./BatchDecoder.js";
import { IncrementalDetokenizer } from "./IncrementalDetokenizer.js";
import { createNativeSampler, nativeGrammarState, type NativeSamplerConfig } from "./llamaInternals.js";
import { ReplyStart } from "./ReplyStart.js";
import { StopSequenceMatcher } from "./StopSequenceMatcher.js";
import { ThoughtSplitter, type ThoughtMarkers } from "./ThoughtSplitter.js";
import type { TokenBytes } from "./TokenBytes.js";
import { Utf8Guard, type Utf8Tables } from "./Utf8Guard.js";
import type { DraftLength } from "./DraftLength.js";
import { ToolCallParser, type CallDelimiters, type ToolCallParserEvent } from "./tools/ToolCallParser.js";

/** How tool calls are generated for one request (absent: no tools, or tool_choice "none"). */
export interface ToolCallPlan {
  /**
   * auto: free text, watched for a call opener; required: a call is opened right away;
   * named: a call of this function is opened with its name already written.
   */
  mode: "auto" | "required" | { name: string };
  /** Texts that open a call in free text (auto mode). */
  openers: string[];
  /** Texts that open a call at the reply's start only (a function named as the recipient: see ReplyStart). */
  startOpeners: string[];
  delimiters: CallDelimiters;
  /** Constrains a call section from just after the opener (or after the name, when named). */
  grammar: LlamaGrammar;
  /**
   * The tokens the sequence must hold to continue inside a call: the prompt, the content written
   * so far, and the call opener (plus the name when named), rendered and tokenized together. What
   * they hold beyond the prompt's length counts as the completion so far.
   */
  openCall(content: string): Token[];
}

export interface CompletionJob {
  model: LlamaModel;
  /** Decodes the sequence, in batches shared with the context's other sequences. */
  decoder: BatchDecoder;
  sequence: DecoderSequence;
  /** The prompt; an image's tokens are its pseudo-tokens, one per position (see PromptImages). */
  promptTokens: Token[];
  /** The prompt's images, if it shows any. */
  images?: PromptImages | undefined;
  /** How many leading prompt tokens the sequence already holds from an earlier request. */
  cachedTokens: number;
  /**
   * Generation stops after this many completion tokens with finish reason "length". A call's
   * opening written from the template counts toward it like sampled tokens (see streamCompletion).
   */
  maxTokens: number;
  /**
   * performance.now() after which generation stops with finish reason "length", as if maxTokens
   * were reached (--max-generation-time); checked after each generated token. Infinity: none.
   */
  deadline: number;
  /** The request's stop sequences: the `done` event names the one that ended generation. */
  stop: readonly string[];
  /** The template's plain-text stop triggers: they end generation too, as the end of the turn. */
  templateStops: readonly string[];
  /** Tokens that end the turn besides the model's end-of-generation tokens (from the chat template). */
  stopTokens: ReadonlySet<Token>;
  sampling: SamplingOptions;
  /** Constrains the reply's text (response_format json_object / json_schema). */
  textGrammar?: LlamaGrammar;
  tools?: ToolCallPlan;
  /** The template's thought section, when the reply may think: its text is given out as `thinking` events. */
  thought?: { markers: ThoughtMarkers; opened: boolean };
  /** The header the reply's text begins with, left out of it (Functionary v3.2's recipient `all\n`: see ReplyStart). */
  textHeader?: string;
  signal: AbortSignal;
  /** Time the request spent loading the model, reported in the `done` event's timings. */
  loadMs: number;
  /** Asked for: each token's log-probability and the `top` most likely tokens at its position. */
  logprobs?: { top: number; bytes: TokenBytes };
  /** With a grammar (textGrammar, tools): what keeps its output valid UTF-8 (see Utf8Guard). */
  utf8?: Utf8Tables;
  /** Counts the prompt work; a prompt shared by n choices was counted once by whoever evaluated it. */
  counters: EngineCounters;
  /** The sequence already holds the prompt but its last token (evaluated once and copied for n choices). */
  sharedPrompt?: boolean;
  /** Speculative decoding: drafts its tokens (see BatchDecoder's #verify); its totals go in the `done` event. */
  drafter?: Drafter & DraftLength;
}

/** A completion under way: its events, and what it has generated so far. */
export interface Completion {
  events: AsyncGenerator<ChatEvent, void, undefined>;
  /** Current as tokens are generated, so an aborted stream's usage is known too. */
  readonly completionTokens: number;
}

/** How many recent tokens the penalties look at, unless the request says. */
const PENALTY_WINDOW = 256;

/** vLLM's stand-in for the log of 0, which JSON cannot carry. */
const LOGPROB_FLOOR = -9999;

const utf8Text = new TextDecoder();

/**
 * Decodes one completion on a sequence the caller owns. Its events are text and tool-call events as
 * they become final, then `done`. Returning early (the consumer stops iterating) ends generation at
 * once.
 *
 * Generation runs in segments: free text, then, once a call opens, a call section under the call
 * grammar. In auto mode the opener is found in the text; the segment ends with a rewind, and the
 * next one continues from the content before it plus the template's exact opener, so the grammar
 * governs every token of the call.
 *
 * maxTokens bounds the completion, a call's opening included: written from the template rather
 * than sampled (a forced call's opening and name, or the template's opener after a rewind), it is
 * output all the same, and counted as completion tokens. An opening longer than what is left of
 * the limit is cut at the limit: the completion ends there with finish reason "length", no call is
 * given out (its opening, maybe its name, is incomplete) and nothing is sampled; completionTokens is
 * then exactly maxTokens. So completionTokens never exceeds maxTokens, which the hosted profile's
 * token reservations (maxTokens-based) rely on. An opening that fits exactly gives out a named
 * call with empty arguments, cut at the limit too.
 */
export function streamCompletion(job: CompletionJob): Completion {
  const state = new CompletionState(job);
  return {
    events: generate(job, state),
    get completionTokens() {
      return state.completionTokens;
    },
  };
}

/** How a segment ended: the completion is finished, or an auto-mode call opener was found. */
type SegmentEnd = { type: "finished"; reason: FinishReason; stopText?: string } | { type: "rewind" };

/** What a completion has produced so far, carried from one segment to the next. */
class CompletionState {
  /** What the sequence must hold before the next segment: the prompt, later with content and a call opener. */
  context: Token[];
  /** Sampled tokens, which the penalties look at. */
  readonly generated: Token[] = [];
  /**
   * Completion tokens the sequence holds at the start of the current segment, once a call has
   * opened: the content and thought so far and the call's opening, written from the template
   * rather than sampled (they count as completion tokens all the same). 0 before.
   */
  #written = 0;
  /** How many of `generated` were sampled before the current segment (they are in `#written`, re-tokenized). */
  #sampledBefore = 0;
  /** The free text given out so far: a call opened later continues after it (and after the thought). */
  content = "";
  /** Splits the thought from the answer, when the template has a thought section. */
  readonly thought: ThoughtSplitter | undefined;
  /** Reads the call section, once one is open. */
  calls: ToolCallParser | undefined;
  readonly stops: StopSequenceMatcher;
  /** Watches free text for a call opener (auto mode). */
  readonly openers: StopSequenceMatcher | undefined;
  /** Reads the answer's first characters, where the reply names its recipient. */
  readonly start: ReplyStart | undefined;
  firstTokenAt: number | undefined;
  /** Segments run so far. */
  segments = 0;
  readonly #maxTokens: number;
  readonly #promptTokens: number;
  readonly #deadline: number;
  /** With logprobs: those of tokens whose bytes no text event has given out yet, in order. */
  readonly #pendingLogprobs: TokenLogprob[] | undefined;
  /** Bytes of text given out that no pending token has been matched with yet. */
  #textBytes = 0;
  /** The answer has begun (at once, unless the reply opens with a thought section). */
  #answering: boolean;

  constructor(job: CompletionJob) {
    this.context = job.promptTokens;
    this.#promptTokens = job.promptTokens.length;
    this.#maxTokens = job.maxTokens;
    this.#deadline = job.deadline;
    this.#pendingLogprobs = job.logprobs ? [] : undefined;
    this.#answering = job.thought === undefined;
    this.stops = new StopSequenceMatcher([...job.stop, ...job.templateStops]);
    this.openers = job.tools?.mode === "auto" ? new StopSequenceMatcher(job.tools.openers) : undefined;
    this.thought = job.thought ? new ThoughtSplitter(job.thought.markers, job.thought.opened) : undefined;
    const startOpeners = job.tools?.mode === "auto" ? job.tools.startOpeners : [];
    this.start = job.textHeader !== undefined || startOpeners.length > 0 ? new ReplyStart(job.textHeader ?? "", startOpeners) : undefined;
  }

  /** Never more than maxTokens: a call's opening that does not fit is cut there (see openCall). */
  get completionTokens(): number {
    return Math.min(this.#written + this.generated.length - this.#sampledBefore, this.#maxTokens);
  }

  /** No more tokens may be written: the length limit is reached. */
  get exhausted(): boolean {
    return this.completionTokens >= this.#maxTokens;
  }

  /**
   * Continues inside a call: the content so far and the opener (and the name, when given).
   * The completion so far becomes the content as the sequence holds it plus the opening: in auto
   * mode the opener the model began to write is replaced by the template's, not counted twice.
   * False when the opening does not fit in maxTokens: the call is cut before it is complete, and
   * `exhausted` ends the completion there.
   */
  openCall(tools: ToolCallPlan, startedCall?: { name: string }): boolean {
    this.context = tools.openCall((this.thought?.raw ?? "") + (this.start?.dropped ?? "") + this.content);
    this.#written = this.context.length - this.#promptTokens;
    this.#sampledBefore = this.generated.length;
    this.calls = new ToolCallParser(tools.delimiters, startedCall);
    return this.#written <= this.#maxTokens;
  }

  /**
   * A text event; with logprobs, carrying those of the tokens whose bytes its text completes. Text
   * lags tokens (a stop sequence's possible start is held back, as is a split character), and
   * tokens of a stop sequence never become text: their logprobs are never given out either.
   */
  textEvent(text: string): ChatEvent {
    const pending = this.#pendingLogprobs;
    if (!pending) return { type: "text", text };
    this.#textBytes += Buffer.byteLength(text, "utf8");
    let count = 0;
    while (count < pending.length && pending[count]!.bytes.length <= this.#textBytes) this.#textBytes -= pending[count++]!.bytes.length;
    return { type: "text", text, logprobs: pending.splice(0, count) };
  }

  /** Logprobs still pending when generation ended without a stop sequence (e.g. a character cut off by the length limit). */
  takePendingLogprobs(): TokenLogprob[] {
    return this.#pendingLogprobs?.splice(0) ?? [];
  }

  /** Takes a sampled token and its text: the events they give, and how the segment ends if it does. */
  take(token: Token, piece: string, logprob?: TokenLogprob): { events: ChatEvent[]; end?: SegmentEnd } {
    this.generated.push(token);
    const events: ChatEvent[] = [];
    if (this.calls) {
      for (const event of this.calls.push(piece)) {
        const chatEvent = toChatEvent(event);
        if (chatEvent) events.push(chatEvent);
      }
    } else {
      // The thought is given out as it comes; only the answer is watched for calls and stop sequences.
      const split = this.thought?.push(piece) ?? { thinking: "", text: piece };
      if (split.thinking) events.push({ type: "thinking", text: split.thinking });
      // Logprobs are reported for the answer's tokens: not for a call's (as OpenAI's), nor for the
      // thought's and its markers'.
      if (split.text) this.#answering = true;
      if (logprob && this.#answering) this.#pendingLogprobs?.push(logprob);
      const started = this.start?.push(split.text) ?? { text: split.text, call: false };
      if (started.call) return { events, end: { type: "rewind" } };
      const opened = this.openers?.push(started.text) ?? { text: started.text, stopped: false };
      const { text, stopped, matched } = this.stops.push(opened.text);
      if (text) events.push(this.textEvent(text));
      this.content += text;
      if (stopped) return { events, end: { type: "finished", reason: "stop", stopText: matched } };
      if (opened.stopped) return { events, end: { type: "rewind" } };
    }
    if (this.exhausted || performance.now() >= this.#deadline) return { events, end: { type: "finished", reason: "length" } };
    return { events };
  }

  /** The model ended its turn, or the call grammar was complete. */
  endOfTurn(): SegmentEnd {
    return { type: "finished", reason: this.calls?.calls ? "tool_calls" : "stop" };
  }
}

async function* generate(job: CompletionJob, state: CompletionState): AsyncGenerator<ChatEvent, void, undefined> {
  const started = performance.now();
  const { tools } = job;
  if (tools && tools.mode !== "auto") {
    const named = typeof tools.mode === "object" ? { name: tools.mode.name } : undefined;
    // A named call is given out once its opening, name included, is within the limit.
    if (state.openCall(tools, named) && named) yield { type: "tool_call_start", index: 0, name: named.name };
  }
  let end = yield* runSegment(job, state);
  while (end.type === "rewind") {
    // The content before the opener is final: what the stop matcher still holds is content too.
    const tail = state.stops.flush();
    if (tail) yield state.textEvent(tail);
    state.content += tail;
    // Only auto mode watches for an opener, so a rewind always has a tool plan.
    state.openCall(tools!);
    end = yield* runSegment(job, state);
  }

  let finishReason = end.reason;
  let stopText = end.stopText;
  if (!state.calls && stopText === undefined) {
    // Generation ended another way: release what was held back, unless it completes a stop sequence.
    const split = state.thought?.flush() ?? { thinking: "", text: "" };
    if (split.thinking) yield { type: "thinking", text: split.thinking };
    const started = state.start ? state.start.push(split.text).text + state.start.flush() : split.text;
    const opened = state.openers ? state.openers.push(started).text + state.openers.flush() : started;
    const { text, stopped, matched } = state.stops.push(opened);
    const rest = stopped ? text : text + state.stops.flush();
    if (stopped) {
      finishReason = "stop";
      stopText = matched;
    }
    if (rest) yield state.textEvent(rest);
    if (!stopped) {
      const left = state.takePendingLogprobs();
      if (left.length > 0) yield { type: "text", text: "", logprobs: left };
    }
  }
  // A template's stop text ends the turn like its end-of-turn token: only the request's are named.
  const stopSequence = stopText !== undefined && job.stop.includes(stopText) ? { stopSequence: stopText } : {};
  const ended = performance.now();
  const firstToken = state.firstTokenAt ?? ended;
  yield {
    type: "done",
    finishReason,
    usage: {
      // As llama-server counts them: an M-RoPE image by its tokens, not its positions (and so the
      // cached start of the prompt, which holds whole images only: its n_prompt_tokens_cache).
      promptTokens: countedTokens(job.promptTokens, job.promptTokens.length, job.images),
      cachedTokens: countedTokens(job.promptTokens, job.cachedTokens, job.images),
      completionTokens: state.completionTokens,
      ...(state.thought ? { reasoningTokens: state.thought.thoughtPieces } : {}),
    },
    timings: { loadMs: job.loadMs, promptMs: firstToken - started, generationMs: ended - firstToken },
    ...stopSequence,
    ...(job.drafter ? { speculation: { drafted: job.drafter.drafted, accepted: job.drafter.accepted } } : {}),
  };
}

/** Decodes from `state.context` until the completion finishes or a call opener calls for a rewind. */
async function* runSegment(job: CompletionJob, state: CompletionState): AsyncGenerator<ChatEvent, SegmentEnd, undefined> {
  const { model, decoder, sequence, signal } = job;
  // A call's opening used up the limit: nothing is sampled.
  if (state.exhausted) return { type: "finished", reason: "length" };
  const context = state.context;
  // Keep what the cache holds of this context; at least the last token is decoded again, since
  // its logits give the first new token.
  const held = await decoder.keepPrefix(sequence, context, context.length - 1);
  // The first segment evaluates the prompt (a forced call's first segment too, with its opening).
  const firstSegment = state.segments++ === 0;
  if (firstSegment && !job.sharedPrompt) job.counters.promptEvaluations++;
  job.counters.promptTokensEvaluated += context.length - held;
  // Tool syntax and thought markers may be written with control tokens, so they are read with
  // special tokens shown.
  const detokenizer = new IncrementalDetokenizer(model, context, job.tools !== undefined || job.thought !== undefined);
  const grammar = state.calls ? job.tools?.grammar : job.textGrammar;
  const config = samplerConfig(model, job.sampling, state.generated, grammar);
  const guard = grammar && job.utf8 ? new Utf8Guard(job.utf8, config) : undefined;
  const sampler = createNativeSampler(model, guard ? guard.config : config);
  const isEnd = (token: Token) => job.stopTokens.has(token) || model.isEogToken(token);
  const tokens = decoder.generate(
    sequence,
    context.slice(held),
    {
      sampler,
      images: job.images,
      ...(job.logprobs ? { metadata: { probabilities: job.logprobs.top > 0 } } : {}),
      isLast: isEnd,
      endTokens: [
        ...job.stopTokens,
        ...[model.tokens.eos, model.tokens.eot].filter((token) => token !== null),
        ...(guard?.pauseTokens ?? []),
      ],
      ...(guard ? { sampled: (token: Token) => guard.sampled(sampler, token) } : {}),
      ...(job.drafter ? { drafter: job.drafter } : {}),
      limit: job.maxTokens - state.completionTokens,
    },
    signal,
  );
  try {
    let step = await tokens.next();
    state.firstTokenAt ??= performance.now();
    while (!step.done) {
      const sampled = step.value;
      if (isEnd(sampled.token)) return state.endOfTurn();
      const logprob = job.logprobs ? toTokenLogprob(sampled, job.logprobs) : undefined;
      const { events, end } = state.take(sampled.token, detokenizer.push(sampled.token), logprob);
      if (end) {
        yield* events;
        return end;
      }
      signal.throwIfAborted();
      // The decoder has already started on the next token: this one's events are handled (an
      // HTTP write) while it decodes.
      yield* events;
      step = await tokens.next();
    }
  } finally {
    // Waits for a step still decoding this sequence, so its cache is settled before it is released.
    await tokens.return();
    sampler.dispose();
  }
  return state.endOfTurn();
}

/** A token with its text, bytes and the log of its probability (the floor for 0). */
export function tokenAlternative(bytes: TokenBytes, token: Token, probability: number): TokenAlternative {
  const raw = bytes.of(token);
  return { token: utf8Text.decode(Uint8Array.from(raw)), bytes: raw, logprob: Math.max(Math.log(probability), LOGPROB_FLOOR) };
}

function toTokenLogprob(sampled: Sampled, { top, bytes }: NonNullable<CompletionJob["logprobs"]>): TokenLogprob {
  const alternative = (token: Token, probability: number) => tokenAlternative(bytes, token, probability);
  const alternatives: TokenAlternative[] = [];
  if (sampled.probabilities) {
    // Sorted most likely first; tokens the chain removed are not in it (probability 0).
    for (const [token, probability] of sampled.probabilities) {
      if (alternatives.length >= top || probability <= 0) break;
      alternatives.push(alternative(token, probability));
    }
  }
  return { ...alternative(sampled.token, sampled.confidence ?? sampled.probabilities?.get(sampled.token) ?? 0), top: alternatives };
}

/** A call's end is implied by the next call's start or the end of the completion: no event. */
function toChatEvent(event: ToolCallParserEvent): ChatEvent | undefined {
  switch (event.type) {
    case "start":
      return { type: "tool_call_start", index: event.index, name: event.name };
    case "arguments":
      return { type: "tool_call_arguments", index: event.index, text: event.text };
    case "end":
      return undefined;
    default:
      return event satisfies never;
  }
}

/**
 * The native sampler's settings for one segment, with node-llama-cpp's defaults where the request
 * has none (top-k 40). An unseeded request gets a random seed, once: node-llama-cpp's
 * own default, the time in seconds, gave every choice of an `n` request started in the same second
 * the same seed. Logit bias: -100 or less bans a token; a bias on an end-of-generation token is
 * ignored, as node-llama-cpp's TokenBias does (so a reply can always end).
 */
function samplerConfig(
  model: LlamaModel,
  sampling: SamplingOptions,
  generated: readonly Token[],
  grammar: LlamaGrammar | undefined,
): NativeSamplerConfig {
  const config: NativeSamplerConfig = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    // llama-server's and Ollama's default; OpenAI has no top_k.
    topK: sampling.topK ?? 40,
    minP: sampling.minP ?? 0,
    seed: sampling.seed === undefined ? randomInt(2 ** 32) : Math.max(0, Math.floor(sampling.seed)),
  };
  const bias = [...sampling.logitBias].filter(([token]) => !model.isEogToken(token as Token));
  if (bias.length > 0) {
    // OpenAI: "values like -100 or 100 should result in a ban or exclusive selection of the token".
    config.tokenBiasKeys = Uint32Array.from(bias, ([token]) => token);
    config.tokenBiasValues = Float32Array.from(bias, ([, value]) => (value <= -100 ? -Infinity : value));
  }
  const repeatPenalty = sampling.repeatPenalty ?? 1;
  // A window of 0 turns the penalties off; Infinity covers everything generated.
  const window = sampling.penaltyWindow ?? PENALTY_WINDOW;
  if (window > 0 && (sampling.presencePenalty !== 0 || sampling.frequencyPenalty !== 0 || repeatPenalty !== 1)) {
    // The penalties apply to the completion so far (as vLLM does for OpenAI's), not to the prompt;
    // the sampler then adds each token it samples to that history itself.
    const history = Number.isFinite(window) ? generated.slice(-window) : generated;
    config.repeatPenalty = repeatPenalty;
    // The sampler keeps the last `repeatPenaltyMaxTokens` tokens: "all" is as many as a context holds.
    config.repeatPenaltyMaxTokens = Number.isFinite(window) ? window : Math.max(model.trainContextSize, generated.length + 1);
    config.repeatPenaltyTokens = Uint32Array.from(history);
    config.repeatPenaltyPresencePenalty = sampling.presencePenalty;
    config.repeatPenaltyFrequencyPenalty = sampling.frequencyPenalty;
  }
  if (grammar) config.grammarEvaluationState = nativeGrammarState(new LlamaGrammarEvaluationState({ model, grammar }));
  return config;
}
