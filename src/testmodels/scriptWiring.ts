// The weights that make a scripted test model write a chosen reply: under greedy decoding every
// reply starts with the script's tokens, exactly, then goes on as free random text (or ends, when
// the script ends with the end-of-turn token). Unlike the thinking model's bigram chain
// (thoughtWiring.ts), the next token depends on the last two, so a token may come back with a
// different successor: gpt-oss's `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…`.
import type { GgufTensor } from "../gguf/GgufWriter.js";
import { editedTensor } from "./modelWriterParts.js";
import type { LlamaPreset } from "./presets.js";
import { TokenType, type TestVocabulary } from "./testVocabulary.js";

/**
 * A reply for a model to write: the token texts in the vocabulary's byte-symbol spelling ("Ċ" a
 * newline, "Ġsky" " sky"; scriptTokens.ts makes them from text). The first token is the source:
 * the last token of the generation prompt, which the model follows with the second and so on. A
 * token that is not in the vocabulary (a family's marker, `<think>` or `<|channel|>`) is added to
 * it as a user-defined token. The script may end with the end-of-turn token (`<|im_end|>`), so the
 * reply ends there; otherwise free text follows.
 */
export interface TestModelScript {
  readonly tokens: readonly string[];
  /**
   * Tokens to add to the vocabulary as user-defined besides the script's own: a family's other
   * markers, which its template writes into prompts (gpt-oss's `<|return|>` and `<|call|>`, whose
   * presence makes llama.cpp keep `<|end|>` out of the end-of-generation tokens, as for gpt-oss).
   */
  readonly addedTokens?: readonly string[];
}

/*
 * The mechanism. Some dimensions of the hidden state are reserved, the last ones: a constant one,
 * a "current" one for each distinct script token (one-hot) plus one shared by every other token,
 * and a "previous" one for each distinct script token. No block writes there (their output rows
 * are zero) except block 0's attention, whose head 0 is a previous-token head writing the
 * previous position's "current" one-hot into the "previous" dimensions. The output matrix then
 * reads (previous, current) and the constant additively:
 *
 *   logit(T) = (L·V / rms) · (Σ_{c ∈ curs(T)} [current = c] + Σ_{p ∈ prevs(T)} [previous = p] − 1)
 *
 * where curs(T) and prevs(T) are the current and previous tokens of the script steps that T
 * follows. So a script token gets one unit when both match a step of its own, zero when only one
 * does (a token repeated with another successor), and minus one otherwise: it is never written in
 * free text (its other output weights are zero, as for control tokens). The first step's previous
 * token is the prompt's, unknown, so its target reads the source's current dimension twice and
 * minus once the previous tokens of the source's later steps. `verifyScript` computes every
 * step's logits in these units and refuses a script the sums cannot tell apart.
 *
 * The previous-token head. Every embedding is [its random values scaled to unit RMS, then the
 * constant V, its current flag V], so all have the same RMS (rms0 below) and the head's query and
 * key, which read only the constant dimension, are the same vectors at every position. llama.cpp
 * rotates them with llama's "normal" RoPE: pairs of adjacent head values (2i, 2i+1) turned by
 * position · base^(−2i/headDim). The query is (A, 0) and the key is B·(cos θ_i, sin θ_i) on each of
 * the first ROPE_PAIRS pairs, so the score at distance Δ is
 *
 *   (A·B / sqrt(headDim)) · Σ_i cos((Δ − 1)·θ_i),
 *
 * the largest at Δ = 1. For script-tiny (headDim 64, base 10000: θ = 1, 0.75, 0.56, 0.42, 0.32,
 * 0.24, 0.18, 0.13) the sum is 8 at Δ = 1 and at most 6.93 at any other distance up to 32,768
 * (Δ = 0 and 2 come closest), a gap of 13.4%; with the score at Δ = 1 set to PEAK_SCORE = 400 the
 * gap is 53.6 nats, so the head's weight on the previous position is 1 − 4096·e^−53.6, i.e. 1.
 * (`previousTokenHeadMargin` computes it for a preset; under 20 nats the preset is refused.) The
 * head's value is the "current" one-hot, the attention output writes it V times into "previous".
 *
 * Sizes: V = 4 against the random values' unit RMS keeps the random text varied (the reserved
 * dimensions do not dominate the blocks' inputs); L = 30 makes a step's target logit L·V / rms,
 * about 100 with the final RMS about 1.1, where a script token matching half a step has 0, the
 * others −100, and the random tokens' best about 20 (output gain 8). Measured on script-tiny
 * (the scripts of test/model/scriptedModel.test.ts, logits from node-llama-cpp's probabilities at
 * temperature 4): the written token leads the runner-up, always a random token, by 71 to 98.
 *
 * Limits. The state is the last two tokens: a pair may have one successor (JSON with two keys,
 * `"name": … "arguments":`, repeats `":` with other successors; gpt-oss's real generation prompt
 * ends `<|start|>assistant`, which the script's second `<|start|>assistant<|channel|>` repeats).
 * The first step assumes the prompt's token before the source is not one of the script's tokens
 * that precede the source elsewhere in it.
 */

/** Residual-stream value of the constant, current and previous dimensions. */
const V = 4;
/** Output weight on the reserved dimensions, in units of one step match. */
const L = 30;
/** RoPE pairs of head 0 that carry the previous-token head's position signal. */
const ROPE_PAIRS = 8;
/** The previous-token head's score at distance 1 (after llama.cpp's 1/sqrt(headDim) scale). */
const PEAK_SCORE = 400;
/** Smallest gap (nats) between distance 1 and any other distance for a preset to be usable. */
const MIN_HEAD_MARGIN = 20;
/** Random dimensions left at least, so free text stays varied. */
const MIN_FREE_DIMENSIONS = 24;

/** Byte symbols of bytes that are not printable (U+0100–U+0143): a sign of a misspelled byte-level token. */
const SHIFTED_BYTE_SYMBOL = /[\u0100-\u0143]/u;

/** The vocabulary with the script's tokens that it lacks added after its others (existing ids unchanged). */
export function withScriptTokens(vocabulary: TestVocabulary, script: TestModelScript): TestVocabulary {
  const known = new Set(vocabulary.tokens);
  const added = [...new Set([...script.tokens, ...(script.addedTokens ?? [])].filter((token) => !known.has(token)))];
  for (const token of added) {
    if (token.length === 0 || SHIFTED_BYTE_SYMBOL.test(token)) {
      throw new Error(
        `The script's token ${JSON.stringify(token)} is not in the test vocabulary; spell text as its tokens with scriptTokens() (src/testmodels/scriptTokens.ts).`,
      );
    }
  }
  return {
    ...vocabulary,
    tokens: [...vocabulary.tokens, ...added],
    tokenTypes: [...vocabulary.tokenTypes, ...added.map(() => TokenType.userDefined)],
  };
}

/** One transition: after `previous` (undefined: any prompt token) and `current`, the model writes `next` (script indexes of distinct tokens). */
interface Step {
  previous: number | undefined;
  current: number;
  next: number;
  /** Position of `next` in the script. */
  at: number;
}

/** What the output matrix reads, per distinct script token, in units of L. */
interface TargetWeights {
  current: Map<number, number>;
  previous: Map<number, number>;
  constant: number;
}

/**
 * The script's distinct tokens, its steps, and the output weights that follow them; throws when a
 * (previous, current) pair has two successors or when the additive logits cannot tell steps apart.
 */
export function planScript(tokens: readonly string[], endsGeneration: (token: string) => boolean) {
  if (tokens.length < 2) throw new Error("A script needs a source token and at least one token to write.");
  const distinct = [...new Set(tokens)];
  const index = (token: string) => distinct.indexOf(token);
  const steps: Step[] = tokens.slice(1).map((token, i) => ({
    previous: i === 0 ? undefined : index(tokens[i - 1]!),
    current: index(tokens[i]!),
    next: index(token),
    at: i + 1,
  }));
  const last = tokens.at(-1)!;
  // After the script, free text: the state after its last token must not be one of its steps.
  const end = endsGeneration(last) ? undefined : { previous: index(tokens.at(-2)!), current: index(last) };
  const name = (i: number | undefined) => (i === undefined ? "(prompt)" : JSON.stringify(distinct[i]));

  const seen = new Map<string, Step>();
  for (const step of steps) {
    const key = `${step.previous} ${step.current}`;
    const earlier = seen.get(key);
    if (earlier && earlier.next !== step.next) {
      throw new Error(
        `The script's tokens ${name(step.previous)}, ${name(step.current)} are followed by ${name(earlier.next)} (token ${earlier.at}) and by ${name(step.next)} (token ${step.at}): a scripted model's next token depends on the last two only, so each pair may have one successor.`,
      );
    }
    if (earlier) {
      throw new Error(
        `The script's tokens ${name(step.previous)}, ${name(step.current)}, ${name(step.next)} come twice (tokens ${earlier.at} and ${step.at}): a scripted model would repeat what follows them for ever.`,
      );
    }
    seen.set(key, step);
  }
  if (end && seen.has(`${end.previous} ${end.current}`)) {
    throw new Error(
      `The script ends with ${name(end.previous)}, ${name(end.current)}, which it has earlier with a successor: the model would go on. End it differently or with the end-of-turn token.`,
    );
  }

  const weights: TargetWeights[] = distinct.map(() => ({ current: new Map(), previous: new Map(), constant: 0 }));
  const [first, ...rest] = steps as [Step, ...Step[]];
  for (const step of rest) {
    const target = weights[step.next]!;
    target.current.set(step.current, 1);
    target.previous.set(step.previous!, 1);
    target.constant = -1;
  }
  const opener = weights[first.next]!;
  opener.current.set(first.current, 2);
  opener.constant = -1;
  for (const step of rest) {
    if (step.current === first.current && step.next !== first.next) opener.previous.set(step.previous!, -1);
  }

  const logits = (previous: number | undefined, current: number) =>
    weights.map(
      (target) =>
        (target.current.get(current) ?? 0) + (previous === undefined ? 0 : (target.previous.get(previous) ?? 0)) + target.constant,
    );
  for (const step of steps) {
    const scores = logits(step.previous, step.current);
    const rival = scores.findIndex((score, i) => i !== step.next && score > 0);
    if (scores[step.next]! < 1 || rival >= 0) {
      throw new Error(
        `The script's step ${name(step.previous)}, ${name(step.current)} → ${name(step.next)} (token ${step.at}) cannot be told apart from ${name(rival >= 0 ? rival : undefined)} by a scripted model's additive logits (each target reads its steps' previous and current tokens separately); reword the script.`,
      );
    }
  }
  if (end) {
    const rival = logits(end.previous, end.current).findIndex((score) => score > 0);
    if (rival >= 0) {
      throw new Error(
        `After the script's last tokens ${name(end.previous)}, ${name(end.current)} a scripted model would write ${name(rival)} (it follows each of them elsewhere in the script); end it differently or with the end-of-turn token.`,
      );
    }
  }
  return { distinct, weights };
}

/**
 * Score gap (nats) of the previous-token head between distance 1 and the best other distance
 * below the context length, for a preset's head size and RoPE base (see the comment above).
 */
export function previousTokenHeadMargin(preset: LlamaPreset): number {
  const headDim = preset.embeddingLength / preset.headCount;
  const thetas = Array.from({ length: ROPE_PAIRS }, (_, i) => preset.ropeFreqBase ** ((-2 * i) / headDim));
  let best = -Infinity;
  for (let distance = 0; distance < preset.contextLength; distance++) {
    if (distance === 1) continue;
    best = Math.max(
      best,
      thetas.reduce((sum, theta) => sum + Math.cos((distance - 1) * theta), 0),
    );
  }
  return (PEAK_SCORE * (ROPE_PAIRS - best)) / ROPE_PAIRS;
}

/** Wires the script into a llama model's weights; `vocabulary` has its tokens (withScriptTokens). */
export function scriptWiring(vocabulary: TestVocabulary, preset: LlamaPreset, script: TestModelScript) {
  const hidden = preset.embeddingLength;
  const headDim = hidden / preset.headCount;
  if (headDim < 2 * ROPE_PAIRS)
    throw new Error(`A scripted model needs heads of at least ${2 * ROPE_PAIRS} values; ${preset.name} has ${headDim}.`);
  const margin = previousTokenHeadMargin(preset);
  if (margin < MIN_HEAD_MARGIN) {
    throw new Error(`${preset.name}'s RoPE cannot single out the previous token over its context (margin ${margin.toFixed(1)} nats).`);
  }
  const { distinct, weights } = planScript(
    script.tokens,
    (token) => vocabulary.tokens.indexOf(token) === vocabulary.eosId || vocabulary.tokens.indexOf(token) === vocabulary.eotId,
  );
  const count = distinct.length;
  const free = hidden - 2 - 2 * count;
  if (count > headDim || free < MIN_FREE_DIMENSIONS) {
    throw new Error(
      `A script of ${count} distinct tokens is too large for ${preset.name} (at most ${Math.min(headDim, Math.floor((hidden - 2 - MIN_FREE_DIMENSIONS) / 2))}); use the script-tiny preset or a shorter script.`,
    );
  }
  const ids = distinct.map((token) => vocabulary.tokens.indexOf(token));
  const scriptIndex = new Map(ids.map((id, i) => [id, i]));
  // Reserved dimensions, the last ones of the hidden state.
  const constant = free;
  const other = free + 1;
  const currentOf = (i: number) => free + 2 + i;
  const previousOf = (i: number) => free + 2 + count + i;
  // Every embedding row has `free` unit values and two of V: its RMS over the hidden size.
  const rms0 = Math.sqrt((free + 2 * V * V) / hidden);
  // Query and key lengths per RoPE pair: A = B, with A·B·ROPE_PAIRS / sqrt(headDim) = PEAK_SCORE.
  const pairLength = Math.sqrt((PEAK_SCORE * Math.sqrt(headDim)) / ROPE_PAIRS);
  const fromConstant = (pairLength * rms0) / V;

  /** Rows of `width` values (a matrix [width, rows] in ggml order: one row per output). */
  const rows = (values: Float32Array, width: number) =>
    Array.from({ length: values.length / width }, (_, row) => values.subarray(row * width, (row + 1) * width));
  const zeroReserved = (values: Float32Array, inputs: number) => values.fill(0, free * inputs, hidden * inputs);

  return {
    embedding: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) =>
        rows(values, hidden).forEach((row, id) => {
          const random = row.subarray(0, free);
          const scale = Math.sqrt(free / random.reduce((sum, value) => sum + value * value, 0));
          for (let i = 0; i < free; i++) random[i]! *= scale;
          row.fill(0, free);
          row[constant] = V;
          const own = scriptIndex.get(id);
          row[own === undefined ? other : currentOf(own)] = V;
        }),
      ),
    /** Block 0's query projection: head 0 reads the constant, (A, 0) on each of the first RoPE pairs. */
    query: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = rows(values, hidden).slice(0, headDim);
        for (const row of head) row.fill(0);
        for (let pair = 0; pair < ROPE_PAIRS; pair++) head[2 * pair]![constant] = fromConstant;
      }),
    /** Block 0's key projection: head 0 reads the constant, B·(cos θ, sin θ) on each of the first RoPE pairs. */
    key: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = rows(values, hidden).slice(0, headDim);
        for (const row of head) row.fill(0);
        for (let pair = 0; pair < ROPE_PAIRS; pair++) {
          const theta = preset.ropeFreqBase ** ((-2 * pair) / headDim);
          head[2 * pair]![constant] = fromConstant * Math.cos(theta);
          head[2 * pair + 1]![constant] = fromConstant * Math.sin(theta);
        }
      }),
    /** Block 0's value projection: head 0's value i is 1 when the token is script token i. */
    value: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = rows(values, hidden).slice(0, headDim);
        for (const row of head) row.fill(0);
        for (let i = 0; i < count; i++) head[i]![currentOf(i)] = rms0 / V;
      }),
    /** Block 0's attention output: head 0's value i, V times, into previous dimension i; nothing else to the reserved ones. */
    attentionOutput: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        zeroReserved(values, hidden);
        const all = rows(values, hidden);
        for (let i = 0; i < count; i++) all[previousOf(i)]![i] = V;
      }),
    /** The other attention outputs and feed-forward down projections ([inputs, hidden]): nothing written to the reserved dimensions. */
    residualWriter: (tensor: GgufTensor, inputs: number) => editedTensor(tensor, (values) => zeroReserved(values, inputs)),
    output: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) =>
        rows(values, hidden).forEach((row, id) => {
          const own = scriptIndex.get(id);
          if (own === undefined) {
            row.fill(0, free);
            return;
          }
          row.fill(0);
          const target = weights[own]!;
          row[constant] = L * target.constant;
          for (const [current, weight] of target.current) row[currentOf(current)] = L * weight;
          for (const [previous, weight] of target.previous) row[previousOf(previous)] = L * weight;
        }),
      ),
  };
}
