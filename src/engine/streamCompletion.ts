import type { LlamaContextSequence, LlamaModel, SequenceEvaluateOptions, Token } from "node-llama-cpp";
import type { ChatEvent, FinishReason } from "../core/ChatEvent.js";
import type { SamplingOptions } from "../core/ChatRequest.js";
import type { DecodeBarrier } from "./DecodeBarrier.js";
import { IncrementalDetokenizer } from "./IncrementalDetokenizer.js";
import { StopSequenceMatcher } from "./StopSequenceMatcher.js";

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
  /** Prompt tokens evaluated per decode call while the prompt is long, checking for abort between. */
  promptChunkSize: number;
  /** Shared by the sequences of one context, so their token requests share batches. */
  barrier: DecodeBarrier;
  signal: AbortSignal;
}

/** How many recent tokens the presence and frequency penalties look at. */
const PENALTY_WINDOW = 256;

/**
 * Decodes one completion on a sequence the caller owns and has cleared. Yields text as it becomes
 * final, then `done`. Returning early (the consumer stops iterating) ends generation at once.
 */
export async function* streamCompletion(job: CompletionJob): AsyncGenerator<ChatEvent, void, undefined> {
  const { model, sequence, promptTokens, signal } = job;

  // A long prompt is evaluated in chunks so a client that leaves stops prompt processing too.
  let offset = job.cachedTokens;
  while (promptTokens.length - offset > job.promptChunkSize) {
    signal.throwIfAborted();
    await sequence.evaluateWithoutGeneratingNewTokens(promptTokens.slice(offset, offset + job.promptChunkSize));
    offset += job.promptChunkSize;
  }
  signal.throwIfAborted();

  const generated: Token[] = [];
  const detokenizer = new IncrementalDetokenizer(model, promptTokens);
  const matcher = new StopSequenceMatcher(job.stop);
  let finishReason: FinishReason = "stop";
  let stoppedByText = false;

  if (job.maxTokens > 0) {
    const tokens = sequence.evaluate(promptTokens.slice(offset), samplerOptions(job.sampling, generated));
    try {
      // The prompt and the first token: outside the barrier, so a long prompt never holds up the
      // token steps of the other sequences.
      let step = await tokens.next();
      job.barrier.join();
      try {
        while (!step.done) {
          const token = step.value;
          if (job.stopTokens.has(token)) break;
          generated.push(token);
          const { text, stopped } = matcher.push(detokenizer.push(token));
          if (stopped) {
            stoppedByText = true;
            if (text) yield { type: "text", text };
            break;
          }
          if (generated.length >= job.maxTokens) {
            finishReason = "length";
            if (text) yield { type: "text", text };
            break;
          }
          signal.throwIfAborted();
          // Ask for the next token before handing this one over, so the consumer's work (an HTTP
          // write) overlaps the next decode instead of delaying it.
          const next = job.barrier.next(tokens);
          next.catch(() => {}); // awaited below; this only keeps a failure during the yield from being "unhandled"
          if (text) yield { type: "text", text };
          step = await next;
        }
      } finally {
        job.barrier.leave();
      }
    } finally {
      // Closing node-llama-cpp's generator stops decoding for this sequence before the next batch.
      await tokens.return();
    }
  } else {
    finishReason = "length";
  }

  if (!stoppedByText) {
    const rest = matcher.flush();
    if (rest) yield { type: "text", text: rest };
  }
  yield { type: "done", finishReason, usage: { promptTokens: promptTokens.length, cachedTokens: job.cachedTokens, completionTokens: generated.length } };
}

function samplerOptions(sampling: SamplingOptions, generated: Token[]): SequenceEvaluateOptions {
  const options: SequenceEvaluateOptions = {
    temperature: sampling.temperature,
    topP: sampling.topP,
    // llama-server's and Ollama's default; OpenAI has no top_k.
    topK: 40,
    seed: sampling.seed,
  };
  if (sampling.presencePenalty !== 0 || sampling.frequencyPenalty !== 0) {
    // OpenAI's penalties apply to the completion so far (as vLLM does), not to the prompt.
    options.repeatPenalty = {
      punishTokens: () => generated.slice(-PENALTY_WINDOW),
      maxPunishTokens: PENALTY_WINDOW,
      penalty: 1,
      presencePenalty: sampling.presencePenalty,
      frequencyPenalty: sampling.frequencyPenalty,
    };
  }
  return options;
}
