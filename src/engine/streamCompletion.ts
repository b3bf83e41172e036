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
import { ToolCallParser, type CallDelimiters } from "./tools/ToolCallParser.js";

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
  /** Kept current as tokens are generated, so an aborted stream's usage is known. */
  progress: { completionTokens: number };
  signal: AbortSignal;
  /** Time the request spent loading the model, reported in the `done` event's timings. */
  loadMs: number;
}

/** How many recent tokens the penalties look at, unless the request says. */
const PENALTY_WINDOW = 256;

/**
 * Decodes one completion on a sequence the caller owns. Yields text and tool-call events as they
 * become final, then `done`. Returning early (the consumer stops iterating) ends generation at once.
 *
 * Generation runs in segments: free text, then, once a call opens, a call section under the call
 * grammar. In auto mode the opener is found in the text; the sequence is then rewound to the
 * content before it and continues from the template's exact opener, so the grammar governs every
 * token of the call.
 */
export async function* streamCompletion(job: CompletionJob): AsyncGenerator<ChatEvent, void, undefined> {
  const { model, sequence, signal, tools } = job;
  const started = performance.now();
  let firstToken: number | undefined;
  const usesTools = tools !== undefined;
  const forced = tools !== undefined && tools.mode !== "auto";

  let context = job.promptTokens;
  let calls: ToolCallParser | undefined;
  let callTokens = 0;
  let content = "";
  if (forced) {
    const opened = tools.openCall("");
    context = opened.tokens;
    callTokens = opened.openerTokens;
    calls = new ToolCallParser(tools.delimiters, typeof tools.mode === "object" ? { name: tools.mode.name } : undefined);
  }
  const callIds: string[] = [];
  if (tools && typeof tools.mode === "object") {
    callIds[0] = newCallId();
    yield { type: "tool_call_start", index: 0, id: callIds[0], name: tools.mode.name };
  }

  const generated: Token[] = [];
  const stopMatcher = new StopSequenceMatcher(job.stop);
  const openerMatcher = tools?.mode === "auto" ? new StopSequenceMatcher(tools.openers) : undefined;
  let finishReason: FinishReason | undefined;
  let stoppedByText = false;

  while (finishReason === undefined) {
    await sequence.adaptStateToTokens(context.slice(0, -1), false);
    await evaluatePromptInChunks(job, context);
    // Tool syntax may be written with control tokens, so calls are read with special tokens shown.
    const detokenizer = new IncrementalDetokenizer(model, context, usesTools);
    const grammar = calls ? tools?.grammar : job.textGrammar;
    const options = samplerOptions(model, job.sampling, generated);
    if (grammar) options.grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar });
    const tokens = sequence.evaluate(context.slice(sequence.nextTokenIndex), options);
    let rewind = false;
    try {
      // The prompt and the first token: outside the barrier, so a long prompt never holds up the
      // token steps of the other sequences.
      let step = await tokens.next();
      firstToken ??= performance.now();
      job.barrier.join();
      try {
        while (!step.done) {
          const token = step.value;
          if (job.stopTokens.has(token)) {
            finishReason = calls?.calls ? "tool_calls" : "stop";
            break;
          }
          generated.push(token);
          job.progress.completionTokens = generated.length + callTokens;
          const events: ChatEvent[] = [];
          const piece = detokenizer.push(token);
          if (calls) {
            for (const event of calls.push(piece)) {
              if (event.type === "start") {
                callIds[event.index] = newCallId();
                events.push({ type: "tool_call_start", index: event.index, id: callIds[event.index]!, name: event.name });
              } else if (event.type === "arguments") {
                events.push({ type: "tool_call_arguments", index: event.index, text: event.text });
              }
            }
          } else {
            const opened = openerMatcher?.push(piece) ?? { text: piece, stopped: false };
            const { text, stopped } = stopMatcher.push(opened.text);
            if (text) events.push({ type: "text", text });
            content += text;
            if (stopped) {
              finishReason = "stop";
              stoppedByText = true;
            } else if (opened.stopped) rewind = true;
          }
          if (finishReason === undefined && !rewind && generated.length + callTokens >= job.maxTokens) finishReason = "length";
          if (finishReason !== undefined || rewind) {
            yield* events;
            break;
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

    if (rewind && tools) {
      // The content before the opener is final: what the stop matcher still holds is content too.
      const tail = stopMatcher.flush();
      if (tail) yield { type: "text", text: tail };
      content += tail;
      const opened = tools.openCall(content);
      context = opened.tokens;
      callTokens += opened.openerTokens;
      calls = new ToolCallParser(tools.delimiters);
    } else if (finishReason === undefined) {
      // End of generation: the model ended its turn (or the call grammar was complete).
      finishReason = calls?.calls ? "tool_calls" : "stop";
    }
  }

  if (!calls && !stoppedByText) {
    // Generation ended another way: release what was held back, unless it completes a stop sequence.
    const { text, stopped } = stopMatcher.push(openerMatcher?.flush() ?? "");
    const rest = stopped ? text : text + stopMatcher.flush();
    if (stopped) finishReason = "stop";
    if (rest) yield { type: "text", text: rest };
  }
  const ended = performance.now();
  yield {
    type: "done",
    finishReason,
    usage: { promptTokens: job.promptTokens.length, cachedTokens: job.cachedTokens, completionTokens: generated.length + callTokens },
    timings: { loadMs: job.loadMs, promptMs: (firstToken ?? ended) - started, generationMs: ended - (firstToken ?? ended) },
  };
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
