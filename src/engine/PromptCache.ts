import type { Llama, LlamaModel, Token } from "node-llama-cpp";
import type { EngineCounters } from "../core/ModelInfo.js";
import {
  commonPrefixLength as commonPrefix,
  wholeImages,
  type AdapterSet,
  type BatchDecoder,
  type DecoderSequence,
} from "./BatchDecoder.js";
import { createNativeCheckpoint, type NativeCheckpoint } from "./llamaInternals.js";

/** One saved sequence: its tokens, and its state in host memory. */
interface Entry {
  /** The decoder of the context it was saved from: it is restored only into that context's sequences. */
  owner: BatchDecoder;
  /** The adapters its state was computed with: it serves only prompts read with the same. */
  adapters: AdapterSet;
  tokens: readonly Token[];
  checkpoint: NativeCheckpoint;
  bytes: number;
}

/**
 * Architectures whose llama.cpp memory is one plain KV cache (llama_kv_cache: no sliding window,
 * no recurrent or hybrid layers, no indexer), read from llama.cpp's src/models/*.cpp at the
 * version node-llama-cpp 3.22.1 ships. Only for those does node-llama-cpp's checkpoint hold a
 * sequence's whole state: it saves with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY, which a plain cache
 * ignores but which makes a sliding-window (iswa) or hybrid memory write its partial part alone, so
 * a restore there would mix the saved window with another conversation's full-attention cells.
 * Other models keep the cache of their sequences only (cachedTokens as before).
 */
const PLAIN_KV_ARCHITECTURES = new Set([
  "llama",
  "qwen",
  "qwen2",
  "qwen2moe",
  "qwen3",
  "qwen3moe",
  "granite",
  "phi3",
  "mistral3",
  "starcoder2",
  "deepseek2",
  "gemma",
  "smollm3",
  "internlm2",
  "chatglm",
  "glm4",
  "stablelm",
]);

/** Tokens a prompt must drop from a sequence before its state is saved: more than a template's end-of-turn differences. */
const MIN_DROPPED_TO_SAVE = 64;

/** Whether a state of `held` tokens is worth keeping for the `dropped` of them nothing else holds (see PromptCache). */
function worthSaving(dropped: number, held: number): boolean {
  return dropped > MIN_DROPPED_TO_SAVE && dropped * 16 > held;
}

/**
 * The prompt cache beyond the slots, as llama-server's `--cache-ram` (server_prompt_cache): when
 * a sequence is about to be given to another conversation, its KV state is copied to host memory,
 * keyed by its tokens; when a prompt arrives, the saved state that shares the longest start with it
 * is copied back into the sequence (trimmed to that start) if that beats what the sequence holds,
 * so a conversation that comes back after its sequence served others, or a new one with a known
 * system prompt, decodes only the rest. One cache for the engine: the budget is the process's, over
 * every loaded model, least recently used entries out first.
 *
 * Saved when the prompt would drop more than a sixteenth of what the sequence holds, and more than
 * 64 tokens. A save copies the whole state, ~40 µs a token (45 ms for 1,121 tokens on the bench
 * model), where decoding a token again costs 1–6 ms (the bench model reads ~1,000 prompt tokens/s,
 * the Qwen2.5-0.5B shape ~160 on 2 cores): it pays back once the part dropped is over ~1/25 of the
 * state and comes back; a sixteenth leaves room for states that never do. A conversation's next
 * turn drops only the few tokens its template renders differently, under 64, and saves nothing.
 * llama-server saves only when a sequence keeps less than half (f_keep < 0.5); with 8 agents on 4
 * slots sharing a 1,500-token system prompt, a conversation of up to ~3,000 tokens keeps that half
 * when another takes its sequence, so its own turns were lost and decoded again (bench/agents.ts on
 * that shape: 108,604 prompt tokens restored and 52,672 decoded over 81 requests, where the
 * system prompt alone is ~1,650 of each). An entry that a restore takes only the start of is kept,
 * so that prefixes such as a system prompt with tool definitions go on serving other conversations;
 * one it takes all of but a tail too short to be worth a save of its own moves out, as
 * llama-server's does, since the sequence now holds it (host memory then holds the conversations
 * that are not in a sequence, not every one); and a later save that holds all of an entry but such
 * a tail replaces it, so a conversation keeps one state, not one a turn.
 */
export class PromptCache {
  readonly #llama: Llama;
  readonly #budget: number;
  /** Least recently used first. */
  readonly #entries: Entry[] = [];
  #bytes = 0;
  readonly #counters: EngineCounters;

  /**
   * `budgetMiB`: host memory the saved states may take (--cache-ram), more than 0. `counters`:
   * the engine's totals, to which it adds the tokens it restores.
   */
  constructor(llama: Llama, budgetMiB: number, counters: EngineCounters) {
    this.#llama = llama;
    this.#budget = budgetMiB * 1024 * 1024;
    this.#counters = counters;
  }

  /** Whether this model's sequences can be saved and restored whole (see PLAIN_KV_ARCHITECTURES). */
  static supports(model: LlamaModel): boolean {
    const architecture = model.fileInfo.metadata.general.architecture;
    const insights = model.fileInsights;
    return PLAIN_KV_ARCHITECTURES.has(architecture) && insights.swaSize === undefined && !insights.isRecurrent && !insights.isHybrid;
  }

  /** Host memory the saved states take now, in bytes. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Readies `sequence` (the request's own, from `decoder`'s context) for a prompt of `tokens`:
   * saves what it holds if the prompt would cost it most of that, restores the saved state that
   * shares the longest start with the prompt if that is longer than what it keeps, and drops the
   * rest. Resolves to how many leading tokens of the prompt it then holds, at most `keepAtMost`.
   */
  async prepare(
    decoder: BatchDecoder,
    sequence: DecoderSequence,
    tokens: readonly Token[],
    keepAtMost: number,
    adapters: AdapterSet,
  ): Promise<number> {
    const kept = wholeImages(tokens, Math.min(sequence.commonPrefix(tokens, adapters), keepAtMost));
    const found = this.#longest(decoder, adapters, tokens, keepAtMost);
    const best = found && found.length > kept ? found : undefined;
    if (worthSaving(sequence.tokens.length - kept, sequence.tokens.length)) await this.#save(decoder, sequence, best?.entry);
    if (best && (await decoder.restore(sequence, best.entry.checkpoint, best.entry.tokens, best.length, adapters))) {
      this.#counters.promptTokensRestored += best.length;
      // Its own conversation is back: the sequence now holds the entry but for a tail not worth
      // keeping, and saves it again, grown, when another prompt takes the sequence. Kept, it would be
      // a second copy of a state a sequence holds (llama-server moves a restored entry out too).
      if (worthSaving(best.entry.tokens.length - best.length, best.entry.tokens.length)) this.#touch(best.entry);
      else this.#remove(best.entry);
    }
    return decoder.keepPrefix(sequence, tokens, keepAtMost, adapters);
  }

  /** Drops the entries of a context being disposed. */
  forget(owner: BatchDecoder): void {
    for (const entry of this.#entries.filter((each) => each.owner === owner)) this.#remove(entry);
  }

  #longest(
    owner: BatchDecoder,
    adapters: AdapterSet,
    tokens: readonly Token[],
    keepAtMost: number,
  ): { entry: Entry; length: number } | undefined {
    let best: { entry: Entry; length: number } | undefined;
    for (const entry of this.#entries) {
      if (!sameState(entry, owner, adapters)) continue;
      const length = wholeImages(tokens, Math.min(commonPrefix(entry.tokens, tokens), keepAtMost));
      if (length > (best?.length ?? 0)) best = { entry, length };
    }
    return best;
  }

  /** Saves what the sequence holds, making room by evicting least recently used entries, but never `spare` (about to be restored). */
  async #save(owner: BatchDecoder, sequence: DecoderSequence, spare: Entry | undefined): Promise<void> {
    const tokens = [...sequence.tokens];
    if (tokens.length === 0) return;
    // Already saved whole (it came from this cache and has decoded nothing since, say).
    const adapters = sequence.adapters;
    if (this.#entries.some((entry) => sameState(entry, owner, adapters) && commonPrefix(entry.tokens, tokens) === tokens.length)) return;
    const checkpoint = createNativeCheckpoint(this.#llama);
    try {
      await owner.save(sequence, checkpoint);
    } catch {
      checkpoint.dispose();
      return;
    }
    const bytes = checkpoint.size;
    // A state that does not hold exactly these positions, or that does not fit beside the entry
    // about to be restored, is not kept.
    if (checkpoint.minPos !== 0 || checkpoint.maxPos !== tokens.length - 1 || bytes + (spare?.bytes ?? 0) > this.#budget) {
      checkpoint.dispose();
      return;
    }
    // Entries this one contains, but for a tail too short to have been worth a save of its own (a
    // reply the next turn re-tokenizes differently, say), are of no more use: a conversation keeps
    // one state, not one a turn.
    for (const entry of this.#entries.filter(
      (each) =>
        each !== spare &&
        sameState(each, owner, adapters) &&
        !worthSaving(each.tokens.length - commonPrefix(each.tokens, tokens), each.tokens.length),
    ))
      this.#remove(entry);
    while (this.#bytes + bytes > this.#budget) this.#remove(this.#entries.find((entry) => entry !== spare)!);
    this.#entries.push({ owner, adapters, tokens, checkpoint, bytes });
    this.#bytes += bytes;
  }

  #touch(entry: Entry): void {
    this.#entries.splice(this.#entries.indexOf(entry), 1);
    this.#entries.push(entry);
  }

  #remove(entry: Entry): void {
    const index = this.#entries.indexOf(entry);
    if (index === -1) return;
    this.#entries.splice(index, 1);
    this.#bytes -= entry.bytes;
    // A restore reading it meanwhile holds its lock: the data goes once that is done, and the
    // restore reports failure if it had not started (BatchDecoder.restore).
    entry.checkpoint.dispose();
  }
}

/** Whether an entry holds states of `owner`'s context computed with `adapters`. */
function sameState(entry: Entry, owner: BatchDecoder, adapters: AdapterSet): boolean {
  return entry.owner === owner && entry.adapters.key === adapters.key;
}
