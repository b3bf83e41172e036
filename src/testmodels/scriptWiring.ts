// The weights that make a scripted test model write a chosen reply: under greedy decoding every
// reply starts with the script's tokens, exactly, then goes on as free random text (or ends, when
// the script ends with an end-of-generation token). Unlike the thinking model's bigram chain
// (thoughtWiring.ts), the next token depends on the last two, and on whether chosen "state
// markers" have been written, so a token may come back with a different successor: gpt-oss's
// `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…`.
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
  /**
   * Tokens of the reply whose having been written the model reads: one "seen" flag each, from an
   * attention head of its own (see the mechanism below). Where the same two tokens come back with
   * another successor (gpt-oss's `assistant`, `<|channel|>` before `analysis`, and again before
   * `final`), a marker the reply first writes between them tells them apart (planScript names the
   * candidates). The prompt must not contain a marker: there its flag would be on from the reply's
   * first token, so a past assistant turn's thought must not have it either.
   */
  readonly stateMarkers?: readonly string[];
}

/*
 * The mechanism. Some dimensions of the hidden state are reserved, the last ones: a constant one,
 * a "current" one for each distinct script token (one-hot) plus one shared by every other token,
 * a "previous" one for each distinct script token, and a "seen" one for each state marker. No
 * block writes there (their output rows are zero) except block 0's attention, whose head 0 is a
 * previous-token head writing the previous position's "current" one-hot into the "previous"
 * dimensions, and whose state heads (one per marker) write its "seen" flag. The output matrix then
 * reads (previous, current, seen) and the constant additively:
 *
 *   logit(T) = (L·V / rms) · (Σ_c a_T(c)·[current = c] + Σ_p b_T(p)·[previous = p] + Σ_m g_T(m)·[seen m] + k_T)
 *
 * with, as the base, a_T = b_T = 1 on the current and previous tokens of the script steps that T
 * follows and k_T = −1. So a script token gets one unit when both match a step of its own, zero
 * when only one does (a token repeated with another successor), and minus one otherwise: it is
 * never written in free text (its other output weights are zero, as for control tokens). The first
 * step's previous token is the prompt's, unknown, so its target reads the source's current
 * dimension twice and minus once the previous tokens of the source's later steps.
 *
 * State markers, for a pair that comes back with another successor once a marker is written (its
 * flag is on from the marker's position, itself included). A target written only before the
 * marker reads its flag with g = −1; one written only after it, with g = +1 and k one lower; so
 * each drops a unit on the other side. A target written on both sides reads it only if one of its
 * steps has a twin on the other side (the same pair, another successor): g = −1 if its twin is
 * after it (+1 and k − 1 if before), and its own steps on the side where it drops get one more
 * on their current token to make up. gpt-oss's reply in the test vocabulary, after a prompt ending
 * `…a ss i st an t`, is `<|channel|> an al y s is <|message|> The Ġs k y <|end|> <|start|> a ss i
 * st an t <|channel|> f in al <|message|> B l u e . <|return|>`: (t, <|channel|>) comes twice,
 * followed by `an`, then by `f`. With `The` as the marker `f` reads g = +1, k = −2, so it scores
 * 1 + 1 + 1 − 2 = 1 after the thought and 0 before it; `an`, written again in `assistant` after the
 * marker, reads g = −1 and 2 on `st`: 1 + 1 − 1 − 1 = 0 at the second (t, <|channel|>), 1 at the
 * first, and 2 + 1 − 1 − 1 = 1 at (i, st). `planScript` computes every step's logits in these
 * units and refuses a script the sums cannot tell apart, and one whose last state would bring a
 * script token back rather than free text.
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
 * A state head (key/value head 1 for the first marker, and so on; script-tiny has room for one).
 * Its key is nonzero only at its marker (it reads the marker's current flag), its query constant,
 * both on the head's last RoPE pair, the slowest: θ = 10000^(−62/64) = 1.33·10^−4 for script-tiny,
 * which turns 2.18 rad over its 16,384 positions. The query is (A, 0), the key B·(cos φ, sin φ)
 * with φ half that, 1.09, so the score at a marker Δ back is (A·B / sqrt(headDim))·cos(Δθ − φ),
 * between cos φ = 0.46 of its peak and the peak at any distance in the context
 * (`stateHeadRotation`; under 0.25 a preset is refused). Its lowest, at Δ = 0 and at the
 * context's end, is STATE_SCORE = 40 (86.9 at the peak), and every other position scores 0: once
 * the marker is written the head's weight off it is at most 16,384·e^−40 = 7·10^−14. Its value is 1 at the marker and 0 elsewhere,
 * so the flag is 1 from the marker on (however often it comes), and exactly 0 before it: the
 * softmax spreads over positions whose values are all zero. The attention output writes it V times
 * into the marker's "seen" dimension.
 *
 * Sizes: V = 4 against the random values' unit RMS keeps the random text varied (the reserved
 * dimensions do not dominate the blocks' inputs); L = 30 makes a step's target logit L·V / rms,
 * about 100 with the final RMS about 1.1, where a script token matching half a step has 0, the
 * others −100, and the random tokens' best about 20 (output gain 8). Measured on script-tiny
 * (the scripts of test/model/scriptedModel.test.ts, logits from node-llama-cpp's probabilities at
 * temperature 4, or from /v1/completions' logprobs at temperature 2): the written token leads the
 * runner-up, always a random token, by 71 to 98; with a state marker (its `channels` script) by 69
 * to 95, and by 188 where the target matches two units (its opener's current token at
 * (<|end|>, Ċ)).
 *
 * Limits. The state is the last two tokens and the markers written: a state may have one
 * successor (JSON with two keys, `"name": … "arguments":`, repeats `":` with other successors: a
 * marker first written between them must tell them apart). A marker must be absent from the
 * prompt, past turns included; there are as many as key/value heads less one; and the context
 * may not outrun the preset's (the state head's phase is set for it). The first step assumes the
 * prompt's token before the source is not one of the script's tokens that precede the source
 * elsewhere in it.
 */

/** Residual-stream value of the constant, current, previous and seen dimensions. */
const V = 4;
/** Output weight on the reserved dimensions, in units of one step match. */
const L = 30;
/** RoPE pairs of head 0 that carry the previous-token head's position signal. */
const ROPE_PAIRS = 8;
/** The previous-token head's score at distance 1 (after llama.cpp's 1/sqrt(headDim) scale). */
const PEAK_SCORE = 400;
/** Smallest gap (nats) between distance 1 and any other distance for a preset to be usable. */
const MIN_HEAD_MARGIN = 20;
/** A state head's lowest score at its marker over the context, at distance 0 and the farthest (after llama.cpp's 1/sqrt(headDim) scale). */
const STATE_SCORE = 40;
/** Smallest share of its peak a state head's score may keep over the context (the cosine of its key's phase). */
const MIN_STATE_FLOOR = 0.25;
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

/**
 * One transition: after `previous` (undefined: any prompt token) and `current`, with the state
 * markers in `seen` written or not, the model writes `next` (script indexes of distinct tokens).
 */
interface Step {
  previous: number | undefined;
  current: number;
  /** Per state marker: whether it is written at or before `current`. */
  seen: readonly boolean[];
  next: number;
  /** Position of `next` in the script. */
  at: number;
}

/** What the output matrix reads, per distinct script token, in units of L. */
interface TargetWeights {
  current: Map<number, number>;
  previous: Map<number, number>;
  /** Per state marker (its index in the script's stateMarkers): the weight of its "seen" flag. */
  seen: Map<number, number>;
  constant: number;
}

/**
 * The script's distinct tokens, its steps, and the output weights that follow them; throws when
 * two steps with the same state (previous, current, markers seen) have different successors, or
 * when the additive logits cannot tell steps apart (see the mechanism above).
 */
export function planScript(tokens: readonly string[], endsGeneration: (token: string) => boolean, stateMarkers: readonly string[] = []) {
  if (tokens.length < 2) throw new Error("A script needs a source token and at least one token to write.");
  if (new Set(stateMarkers).size !== stateMarkers.length) throw new Error("A script's state markers must be distinct.");
  const distinct = [...new Set(tokens)];
  const index = (token: string) => distinct.indexOf(token);
  const name = (i: number | undefined) => (i === undefined ? "(prompt)" : JSON.stringify(distinct[i]));
  // Where each marker's flag turns on: its first position. The source is the prompt's last token,
  // so a marker there would be seen from the start.
  const firsts = stateMarkers.map((marker) => {
    const first = tokens.indexOf(marker);
    if (first < 1) {
      throw new Error(
        `The state marker ${JSON.stringify(marker)} ${first === 0 ? "is the script's source, the prompt's last token" : "is not in the script"}: a marker must be a token the reply writes and the prompt lacks.`,
      );
    }
    return first;
  });
  const seenAt = (position: number) => firsts.map((first) => first <= position);
  const steps: Step[] = tokens.slice(1).map((token, i) => ({
    previous: i === 0 ? undefined : index(tokens[i - 1]!),
    current: index(tokens[i]!),
    seen: seenAt(i),
    next: index(token),
    at: i + 1,
  }));
  const last = tokens.at(-1)!;
  // After the script, free text: the state after its last token must not be one of its steps.
  const end = endsGeneration(last) ? undefined : { previous: index(tokens.at(-2)!), current: index(last), seen: seenAt(tokens.length - 1) };
  const pairKey = (state: { previous: number | undefined; current: number }) => `${state.previous} ${state.current}`;
  const stateKey = (state: { previous: number | undefined; current: number; seen: readonly boolean[] }) =>
    `${pairKey(state)} ${state.seen.map(Number).join("")}`;
  /** The tokens that could be a state marker telling `earlier`'s state from `later`'s: those first written between them. */
  const markerHint = (earlier: Step, later: Step) => {
    const candidates = [...new Set(tokens.slice(earlier.at, later.at))].filter(
      (token) => tokens.indexOf(token) >= earlier.at && !stateMarkers.includes(token),
    );
    return candidates.length === 0
      ? ""
      : ` Or make one of the tokens the script first writes between them a state marker (stateMarkers), one the prompt lacks: ${candidates.map((token) => JSON.stringify(token)).join(", ")}.`;
  };

  const seen = new Map<string, Step>();
  for (const step of steps) {
    const key = stateKey(step);
    const earlier = seen.get(key);
    if (earlier && earlier.next !== step.next) {
      throw new Error(
        `The script's tokens ${name(step.previous)}, ${name(step.current)} are followed by ${name(earlier.next)} (token ${earlier.at}) and by ${name(step.next)} (token ${step.at}): a scripted model's next token depends on the last two and on the state markers written, so each such state may have one successor.${markerHint(earlier, step)}`,
      );
    }
    if (earlier) {
      throw new Error(
        `The script's tokens ${name(step.previous)}, ${name(step.current)}, ${name(step.next)} come twice (tokens ${earlier.at} and ${step.at}) with the same state markers written: a scripted model would repeat what follows them for ever.${markerHint(earlier, step)}`,
      );
    }
    seen.set(key, step);
  }
  if (end && seen.has(stateKey(end))) {
    throw new Error(
      `The script ends with ${name(end.previous)}, ${name(end.current)}, which it has earlier with a successor: the model would go on. End it differently or with the end-of-turn token.`,
    );
  }

  const weights: TargetWeights[] = distinct.map(() => ({ current: new Map(), previous: new Map(), seen: new Map(), constant: 0 }));
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
  // Each marker's flag: a target written only before it (after it) reads it with −1 (+1, and one
  // more −1 in its constant), so it drops by one on the other side; a target written on both sides
  // reads it only when one of its steps has a twin on the other side (the same two tokens, another
  // successor), and its steps on the side where it drops get one more on their current token.
  stateMarkers.forEach((_, marker) => {
    weights.forEach((target, next) => {
      const own = steps.filter((step) => step.next === next);
      const after = own.filter((step) => step.seen[marker]);
      const before = own.filter((step) => !step.seen[marker]);
      const hasTwin = (step: Step) =>
        steps.some((other) => other.next !== next && other.seen[marker] !== step.seen[marker] && pairKey(other) === pairKey(step));
      const dropAfter = before.length > 0 && (after.length === 0 || before.some(hasTwin));
      const dropBefore = after.length > 0 && (before.length === 0 || after.some(hasTwin));
      if (dropAfter === dropBefore) return;
      target.seen.set(marker, dropAfter ? -1 : 1);
      if (dropBefore) target.constant -= 1;
      for (const current of new Set((dropAfter ? after : before).map((step) => step.current))) {
        target.current.set(current, target.current.get(current)! + 1);
      }
    });
  });

  /** Each target's logit in units of L·V/rms; `current` undefined: a token not in the script. */
  const logits = (previous: number | undefined, current: number | undefined, markers: readonly boolean[]) =>
    weights.map(
      (target) =>
        (current === undefined ? 0 : (target.current.get(current) ?? 0)) +
        (previous === undefined ? 0 : (target.previous.get(previous) ?? 0)) +
        markers.reduce((sum, on, marker) => sum + (on ? (target.seen.get(marker) ?? 0) : 0), 0) +
        target.constant,
    );
  for (const step of steps) {
    const scores = logits(step.previous, step.current, step.seen);
    const rival = scores.findIndex((score, i) => i !== step.next && score > 0);
    if (scores[step.next]! < 1 || rival >= 0) {
      throw new Error(
        `The script's step ${name(step.previous)}, ${name(step.current)} → ${name(step.next)} (token ${step.at}) cannot be told apart from ${name(rival >= 0 ? rival : undefined)} by a scripted model's additive logits (each target reads its steps' previous and current tokens and the state markers separately); reword the script.`,
      );
    }
  }
  if (end) {
    // Then free text: once the current token is not the script's, a target has at most its previous
    // token's 1 and its +1 flags against k = −1 less one per +1 flag, so no script token comes back.
    const rival = logits(end.previous, end.current, end.seen).findIndex((score) => score > 0);
    if (rival >= 0) {
      throw new Error(
        `After the script's last tokens ${name(end.previous)}, ${name(end.current)} a scripted model would write ${name(rival)} (it follows each of them elsewhere in the script); end it differently or with the end-of-turn token.`,
      );
    }
  }
  return { distinct, weights, stateMarkers: stateMarkers.map(index) };
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

/**
 * The state heads' RoPE pair, the last of a head (the slowest turning), and the key's phase: half
 * the angle the pair turns over the context, so the score at any distance is at least `floor` (the
 * cosine of that phase) times its peak (see the comment above).
 */
export function stateHeadRotation(preset: LlamaPreset) {
  const headDim = preset.embeddingLength / preset.headCount;
  const pair = headDim / 2 - 1;
  const theta = preset.ropeFreqBase ** ((-2 * pair) / headDim);
  const phase = ((preset.contextLength - 1) * theta) / 2;
  return { pair, phase, floor: Math.cos(phase) };
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
  const { distinct, weights, stateMarkers } = planScript(
    script.tokens,
    (token) => vocabulary.tokens.indexOf(token) === vocabulary.eosId || vocabulary.tokens.indexOf(token) === vocabulary.eotId,
    script.stateMarkers,
  );
  // State marker j's head: key/value head j + 1 and the first query head reading it.
  const group = preset.headCount / preset.headCountKv;
  if (stateMarkers.length > preset.headCountKv - 1) {
    throw new Error(
      `${preset.name} has room for ${preset.headCountKv - 1} state markers (one key/value head each besides the previous-token head's); the script has ${stateMarkers.length}.`,
    );
  }
  const rotation = stateHeadRotation(preset);
  if (stateMarkers.length > 0 && rotation.floor < MIN_STATE_FLOOR) {
    throw new Error(
      `${preset.name}'s RoPE turns its slowest pair too far over its context for a state head (floor ${rotation.floor.toFixed(2)}).`,
    );
  }
  const count = distinct.length;
  const free = hidden - 2 - 2 * count - stateMarkers.length;
  if (count > headDim || free < MIN_FREE_DIMENSIONS) {
    throw new Error(
      `A script of ${count} distinct tokens is too large for ${preset.name} (at most ${Math.min(headDim, Math.floor((hidden - 2 - stateMarkers.length - MIN_FREE_DIMENSIONS) / 2))}); use the script-tiny preset or a shorter script.`,
    );
  }
  const ids = distinct.map((token) => vocabulary.tokens.indexOf(token));
  const scriptIndex = new Map(ids.map((id, i) => [id, i]));
  // Reserved dimensions, the last ones of the hidden state.
  const constant = free;
  const other = free + 1;
  const currentOf = (i: number) => free + 2 + i;
  const previousOf = (i: number) => free + 2 + count + i;
  const seenOf = (marker: number) => free + 2 + 2 * count + marker;
  // Every embedding row has `free` unit values and two of V: its RMS over the hidden size.
  const rms0 = Math.sqrt((free + 2 * V * V) / hidden);
  // Query and key lengths per RoPE pair: A = B, with A·B·ROPE_PAIRS / sqrt(headDim) = PEAK_SCORE.
  const pairLength = Math.sqrt((PEAK_SCORE * Math.sqrt(headDim)) / ROPE_PAIRS);
  const fromConstant = (pairLength * rms0) / V;
  // The state heads' query and key lengths: A·B·floor / sqrt(headDim) = STATE_SCORE.
  const stateLength = Math.sqrt((STATE_SCORE * Math.sqrt(headDim)) / rotation.floor);
  const stateRow = 2 * rotation.pair;

  /** Rows of `width` values (a matrix [width, rows] in ggml order: one row per output). */
  const rows = (values: Float32Array, width: number) =>
    Array.from({ length: values.length / width }, (_, row) => values.subarray(row * width, (row + 1) * width));
  /** Head `head`'s rows of a query, key or value projection, zeroed. */
  const headRows = (values: Float32Array, head: number) => {
    const own = rows(values, hidden).slice(head * headDim, (head + 1) * headDim);
    for (const row of own) row.fill(0);
    return own;
  };
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
    /**
     * Block 0's query projection: head 0 reads the constant, (A, 0) on each of the first RoPE pairs;
     * each state head reads it too, (A, 0) on its last pair.
     */
    query: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = headRows(values, 0);
        for (let pair = 0; pair < ROPE_PAIRS; pair++) head[2 * pair]![constant] = fromConstant;
        stateMarkers.forEach((_, marker) => {
          headRows(values, (marker + 1) * group)[stateRow]![constant] = (stateLength * rms0) / V;
        });
      }),
    /**
     * Block 0's key projection: head 0 reads the constant, B·(cos θ, sin θ) on each of the first
     * RoPE pairs; a state head reads its marker's current flag, B·(cos φ, sin φ) on its last pair.
     */
    key: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = headRows(values, 0);
        for (let pair = 0; pair < ROPE_PAIRS; pair++) {
          const theta = preset.ropeFreqBase ** ((-2 * pair) / headDim);
          head[2 * pair]![constant] = fromConstant * Math.cos(theta);
          head[2 * pair + 1]![constant] = fromConstant * Math.sin(theta);
        }
        stateMarkers.forEach((own, marker) => {
          const state = headRows(values, marker + 1);
          state[stateRow]![currentOf(own)] = ((stateLength * rms0) / V) * Math.cos(rotation.phase);
          state[stateRow + 1]![currentOf(own)] = ((stateLength * rms0) / V) * Math.sin(rotation.phase);
        });
      }),
    /** Block 0's value projection: head 0's value i is 1 when the token is script token i; a state head's value 0 is 1 at its marker. */
    value: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        const head = headRows(values, 0);
        for (let i = 0; i < count; i++) head[i]![currentOf(i)] = rms0 / V;
        stateMarkers.forEach((own, marker) => {
          headRows(values, marker + 1)[0]![currentOf(own)] = rms0 / V;
        });
      }),
    /**
     * Block 0's attention output: head 0's value i, V times, into previous dimension i; a state
     * head's value 0, V times, into its "seen" dimension; nothing else to the reserved ones.
     */
    attentionOutput: (tensor: GgufTensor) =>
      editedTensor(tensor, (values) => {
        zeroReserved(values, hidden);
        const all = rows(values, hidden);
        for (let i = 0; i < count; i++) all[previousOf(i)]![i] = V;
        stateMarkers.forEach((_, marker) => {
          all[seenOf(marker)]![(marker + 1) * group * headDim] = V;
        });
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
          for (const [marker, weight] of target.seen) row[seenOf(marker)] = L * weight;
        }),
      ),
  };
}
