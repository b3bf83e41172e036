import {
  LlamaGrammarEvaluationState,
  TokenBias,
  type LlamaContextSequence,
  type LlamaGrammar,
  type LlamaModel,
  type SequenceEvaluateOptions,
  type Token,
} from "node-llama-cpp";
import type { ChatEvent, FinishReason } from "../core/ChatEvent.js";
import type { SamplingOptions } from "../core/ChatRequest.js";
import { randomBase62 } from "../core/randomBase62.js";
import type { DecodeBarrier } from "./DecodeBarrier.js";
import { IncrementalDetokenizer } from "./IncrementalDetokenizer.js";
import { StopSequenceMatcher } from "./StopSequenceMatcher.js";
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
  delimiters: CallDelimiters;
  /** Constrains a call section from just after the opener (or after the name, when named). */
  grammar: LlamaGrammar;
  /**
   * The tokens the sequence must hold to continue inside a call: the prompt, the content written
   * so far, and the call opener (plus the name when named), rendered and tokenized together.
   */
  openCall(content: string): { tokens: Token[]; openerTokens: number };
}

export interface CompletionJob {
  model: LlamaModel;
  sequence: LlamaContextSequence;
  promptTokens: Token[];
  /** How many leading prompt tokens the sequence already holds from an earlier request. */
  cachedTokens: number;
  /** Generation stops after this many tokens with finish reason "length". */
  maxTokens: number;
  stop: readonly string[];
  /** Tokens that end the turn besides the model's end-of-generation tokens (from the chat template). */
  stopTokens: ReadonlySet<Token>;
  sampling: SamplingOptions;
  /** Constrains the reply's text (response_format json_object / json_schema). */
  textGrammar?: LlamaGrammar;
  tools?: ToolCallPlan;
  /** Prompt tokens evaluated per decode call while the prompt is long, checking for abort between. */
  promptChunkSize: number;
  /** Shared by the sequences of one context, so their token requests share batches. */
  barrier: DecodeBarrier;
  signal: AbortSignal;
  /** Time the request spent loading the model, reported in the `done` event's timings. */
  loadMs: number;
}

/** A completion under way: its events, and what it has generated so far. */
export interface Completion {
  events: AsyncGenerator<ChatEvent, void, undefined>;
  /** Current as tokens are generated, so an aborted stream's usage is known too. */
  readonly completionTokens: number;
}

/** How many recent tokens the penalties look at, unless the request says. */
const PENALTY_WINDOW = 256;

/**
 * Decodes one completion on a sequence the caller owns. Its events are text and tool-call events as
 * they become final, then `done`. Returning early (the consumer stops iterating) ends generation at
 * once.
 *
 * Generation runs in segments: free text, then, once a call opens, a call section under the call
 * grammar. In auto mode the opener is found in the text; the segment ends with a rewind, and the
 * next one continues from the content before it plus the template's exact opener, so the grammar
 * governs every token of the call.
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
type SegmentEnd = { type: "finished"; reason: FinishReason; atStopSequence: boolean } | { type: "rewind" };

/** What a completion has produced so far, carried from one segment to the next. */
class CompletionState {
  /** What the sequence must hold before the next segment: the prompt, later with content and a call opener. */
  context: Token[];
  /** Sampled tokens, which the penalties look at. */
  readonly generated: Token[] = [];
  /** Call openers written from the template rather than sampled; they count as completion tokens. */
  openerTokens = 0;
  /** The free text given out so far: a call opened later continues after it. */
  content = "";
  /** Reads the call section, once one is open. */
  calls: ToolCallParser | undefined;
  readonly stops: StopSequenceMatcher;
  /** Watches free text for a call opener (auto mode). */
  readonly openers: StopSequenceMatcher | undefined;
  firstTokenAt: number | undefined;
  readonly #maxTokens: number;

  constructor(job: CompletionJob) {
    this.context = job.promptTokens;
    this.#maxTokens = job.maxTokens;
    this.stops = new StopSequenceMatcher(job.stop);
    this.openers = job.tools?.mode === "auto" ? new StopSequenceMatcher(job.tools.openers) : undefined;
  }

  get completionTokens(): number {
    return this.generated.length + this.openerTokens;
  }

  /** Continues inside a call: the content so far and the opener (and the name, when given). */
  openCall(tools: ToolCallPlan, startedCall?: { name: string }): void {
    const opened = tools.openCall(this.content);
    this.context = opened.tokens;
    this.openerTokens += opened.openerTokens;
    this.calls = new ToolCallParser(tools.delimiters, startedCall);
  }

  /** Takes a sampled token and its text: the events they give, and how the segment ends if it does. */
  take(token: Token, piece: string): { events: ChatEvent[]; end?: SegmentEnd } {
    this.generated.push(token);
    const events: ChatEvent[] = [];
    if (this.calls) {
      for (const event of this.calls.push(piece)) {
        const chatEvent = toChatEvent(event);
        if (chatEvent) events.push(chatEvent);
      }
    } else {
      const opened = this.openers?.push(piece) ?? { text: piece, stopped: false };
      const { text, stopped } = this.stops.push(opened.text);
      if (text) events.push({ type: "text", text });
      this.content += text;
      if (stopped) return { events, end: { type: "finished", reason: "stop", atStopSequence: true } };
      if (opened.stopped) return { events, end: { type: "rewind" } };
    }
    if (this.completionTokens >= this.#maxTokens) return { events, end: { type: "finished", reason: "length", atStopSequence: false } };
    return { events };
  }

  /** The model ended its turn, or the call grammar was complete. */
  endOfTurn(): SegmentEnd {
    return { type: "finished", reason: this.calls?.calls ? "tool_calls" : "stop", atStopSequence: false };
  }
}

async function* generate(job: CompletionJob, state: CompletionState): AsyncGenerator<ChatEvent, void, undefined> {
  const started = performance.now();
  const { tools } = job;
  if (tools && tools.mode !== "auto") {
    const named = typeof tools.mode === "object" ? { name: tools.mode.name } : undefined;
    state.openCall(tools, named);
    if (named) yield { type: "tool_call_start", index: 0, id: newCallId(), name: named.name };
  }
  let end = yield* runSegment(job, state);
  while (end.type === "rewind") {
    // The content before the opener is final: what the stop matcher still holds is content too.
    const tail = state.stops.flush();
    if (tail) yield { type: "text", text: tail };
    state.content += tail;
    // Only auto mode watches for an opener, so a rewind always has a tool plan.
    state.openCall(tools!);
    end = yield* runSegment(job, state);
  }

  let finishReason = end.reason;
  if (!state.calls && !end.atStopSequence) {
    // Generation ended another way: release what was held back, unless it completes a stop sequence.
    const { text, stopped } = state.stops.push(state.openers?.flush() ?? "");
    const rest = stopped ? text : text + state.stops.flush();
    if (stopped) finishReason = "stop";
    if (rest) yield { type: "text", text: rest };
  }
  const ended = performance.now();
  const firstToken = state.firstTokenAt ?? ended;
  yield {
    type: "done",
    finishReason,
    usage: { promptTokens: job.promptTokens.length, cachedTokens: job.cachedTokens, completionTokens: state.completionTokens },
    timings: { loadMs: job.loadMs, promptMs: firstToken - started, generationMs: ended - firstToken },
  };
}

/** Decodes from `state.context` until the completion finishes or a call opener calls for a rewind. */
async function* runSegment(job: CompletionJob, state: CompletionState): AsyncGenerator<ChatEvent, SegmentEnd, undefined> {
  const { model, sequence, signal } = job;
  const context = state.context;
  await sequence.adaptStateToTokens(context.slice(0, -1), false);
  await evaluatePromptInChunks(job, context);
  // Tool syntax may be written with control tokens, so calls are read with special tokens shown.
  const detokenizer = new IncrementalDetokenizer(model, context, job.tools !== undefined);
  const grammar = state.calls ? job.tools?.grammar : job.textGrammar;
  const options = samplerOptions(model, job.sampling, state.generated);
  if (grammar) options.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
  const tokens = sequence.evaluate(context.slice(sequence.nextTokenIndex), options);
  try {
    // The prompt and the first token: outside the barrier, so a long prompt never holds up the
    // token steps of the other sequences.
    let step = await tokens.next();
    state.firstTokenAt ??= performance.now();
    job.barrier.join();
    try {
      while (!step.done) {
        const token = step.value;
        if (job.stopTokens.has(token)) return state.endOfTurn();
        const { events, end } = state.take(token, detokenizer.push(token));
        if (end) {
          yield* events;
          return end;
        }
        signal.throwIfAborted();
        // Ask for the next token before handing this one over, so the consumer's work (an HTTP
        // write) overlaps the next decode instead of delaying it.
        const next = job.barrier.next(tokens);
        next.catch(() => {}); // awaited below; this only keeps a failure during the yield from being "unhandled"
        yield* events;
        step = await next;
      }
    } finally {
      job.barrier.leave();
    }
  } finally {
    // Closing node-llama-cpp's generator stops decoding for this sequence before the next batch.
    await tokens.return();
  }
  return state.endOfTurn();
}

/** A call's end is implied by the next call's start or the end of the completion: no event. */
function toChatEvent(event: ToolCallParserEvent): ChatEvent | undefined {
  switch (event.type) {
    case "start":
      return { type: "tool_call_start", index: event.index, id: newCallId(), name: event.name };
    case "arguments":
      return { type: "tool_call_arguments", index: event.index, text: event.text };
    case "end":
      return undefined;
    default:
      return event satisfies never;
  }
}

/** A long prompt is evaluated in chunks so a client that leaves stops prompt processing too. */
async function evaluatePromptInChunks(job: CompletionJob, context: Token[]): Promise<void> {
  const { sequence, signal } = job;
  while (context.length - sequence.nextTokenIndex > job.promptChunkSize) {
    signal.throwIfAborted();
    const start = sequence.nextTokenIndex;
    await sequence.evaluateWithoutGeneratingNewTokens(context.slice(start, start + job.promptChunkSize));
  }
  signal.throwIfAborted();
}

/** `call_` and 24 random base62 characters, as OpenAI's tool call ids look. */
function newCallId(): string {
  return `call_${randomBase62(24)}`;
}

function samplerOptions(model: LlamaModel, sampling: SamplingOptions, generated: Token[]): SequenceEvaluateOptions {
  const options: SequenceEvaluateOptions = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    // llama-server's and Ollama's default; OpenAI has no top_k.
    topK: sampling.topK ?? 40,
    minP: sampling.minP,
    seed: sampling.seed,
  };
  if (sampling.logitBias.size > 0) {
    const bias = new TokenBias(model.tokenizer);
    // OpenAI: "values like -100 or 100 should result in a ban or exclusive selection of the token".
    for (const [token, value] of sampling.logitBias) bias.set(token as Token, value <= -100 ? "never" : { logit: value });
    options.tokenBias = bias;
  }
  const repeatPenalty = sampling.repeatPenalty ?? 1;
  // A window of 0 turns the penalties off; Infinity covers everything generated.
  const window = sampling.penaltyWindow ?? PENALTY_WINDOW;
  if (window > 0 && (sampling.presencePenalty !== 0 || sampling.frequencyPenalty !== 0 || repeatPenalty !== 1)) {
    // The penalties apply to the completion so far (as vLLM does for OpenAI's), not to the prompt.
    options.repeatPenalty = {
      punishTokens: () => generated.slice(-window),
      // node-llama-cpp takes the larger of this and the tokens passed, so 0 leaves it to them.
      maxPunishTokens: Number.isFinite(window) ? window : 0,
      penalty: repeatPenalty,
      presencePenalty: sampling.presencePenalty,
      frequencyPenalty: sampling.frequencyPenalty,
    };
  }
  return options;
}
