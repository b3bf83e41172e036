// JSON Schema `pattern` (an ECMA-262 regular expression) as a finite automaton over characters,
// intersected with a `format` and with minLength / maxLength when a schema has them too, so that
// the grammar made from it (src/engine/jsonSchemaToGbnf.ts) only writes strings satisfying all of
// them at once.
//
// The regular-expression subset is the one llama.cpp's json-schema-to-grammar converts
// (_visit_pattern): literals, escapes, classes `[...]` and `[^...]`, `.`, groups `(...)`, `(?:...)`
// and `(?<name>...)`, alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (lazy or not: the same
// language), and `^` / `$` at the very start and end. Lookarounds, backreferences, word
// boundaries and Unicode property escapes are refused.
//
// A JSON Schema pattern is not anchored: "abc" matches any string containing "abc". So each
// top-level alternative may be preceded by any characters unless it starts with `^`, and followed
// by any unless it ends with `$` (`^a|b$` matches "ax" and "xb"); anchors elsewhere are refused.
//
// Generated characters are code points of the Basic Multilingual Plane other than surrogates, on
// which a JavaScript regular expression behaves the same with and without the `u` flag (`.`
// matches one code unit, and one character). Patterns naming characters beyond U+FFFF are refused.

/** Inclusive code point ranges, sorted and disjoint. */
export type CharSet = readonly (readonly [number, number])[];

/** Thrown with a reason ("lookarounds cannot be enforced") for what cannot be converted. */
export class PatternError extends Error {}

/**
 * A finite automaton without empty moves: state 0 is the start; every state can reach an
 * accepting one (dead states are removed).
 */
export interface StringAutomaton {
  states: readonly AutomatonState[];
}

export interface AutomatonState {
  accepting: boolean;
  /** Moves on disjoint sets of characters. */
  moves: readonly { set: CharSet; to: number }[];
}

/** Largest count in a quantifier `{n,m}`. */
const MAX_QUANTIFIER = 1000;
/** Longest pattern read. */
const MAX_PATTERN_LENGTH = 10_000;
/** Deepest nesting of groups and classes (the parser and the construction recurse). */
const MAX_PATTERN_DEPTH = 50;
/** Largest automaton built, for one pattern or for the intersection. */
const MAX_AUTOMATON_STATES = 5000;

const UNIVERSE: CharSet = [
  [0, 0xd7ff],
  [0xe000, 0xffff],
];

type Node =
  | { kind: "set"; set: CharSet }
  | { kind: "seq"; items: Node[] }
  | { kind: "alt"; options: Node[] }
  | { kind: "repeat"; node: Node; min: number; max: number | undefined };

/** Parses a pattern; throws PatternError for what the subset does not cover. */
export function parsePattern(pattern: string): Node {
  return new Parser(pattern).parse();
}

/**
 * The automaton of the strings that `pattern` matches (when given, as JSON Schema reads it: see
 * above), that are valid for `format` (a regular expression of the same subset, anchored, when
 * given) and that have minLength to maxLength characters. Throws PatternError when the pattern is not convertible, when the intersection is
 * empty, or when it would exceed MAX_AUTOMATON_STATES.
 */
export function stringAutomaton(parts: { pattern?: string; format?: string; minLength?: number; maxLength?: number }): StringAutomaton {
  // Clients tend to send the same schema with every request; zod's e-mail pattern with its format
  // takes some 30 ms to intersect.
  const key = JSON.stringify([parts.pattern, parts.format, parts.minLength, parts.maxLength]);
  const cached = recent.get(key);
  if (cached instanceof PatternError) throw cached;
  if (cached !== undefined) return cached;
  let result: StringAutomaton | PatternError;
  try {
    result = buildStringAutomaton(parts);
  } catch (error) {
    if (!(error instanceof PatternError)) throw error;
    result = error;
  }
  if (recent.size >= RECENT_AUTOMATA) recent.delete(recent.keys().next().value as string);
  recent.set(key, result);
  if (result instanceof PatternError) throw result;
  return result;
}

/** How many automata (or refusals) are kept, by their inputs, oldest dropped first. */
const RECENT_AUTOMATA = 64;
const recent = new Map<string, StringAutomaton | PatternError>();

function buildStringAutomaton(parts: { pattern?: string; format?: string; minLength?: number; maxLength?: number }): StringAutomaton {
  const components: EpsilonFree[] = [];
  if (parts.format !== undefined) components.push(epsilonFree(parsePattern(`^(?:${parts.format})$`)));
  if (parts.pattern !== undefined) components.push(epsilonFree(parsePattern(parts.pattern)));
  const automaton = product(components, parts.minLength ?? 0, parts.maxLength);
  if (automaton.states.length === 0) {
    throw new PatternError(
      parts.format !== undefined || parts.minLength !== undefined || parts.maxLength !== undefined
        ? "no string satisfies the pattern, format and length keywords of this schema together"
        : "the pattern matches no string that can be generated",
    );
  }
  return automaton;
}

// ---- character sets ----

export function normalize(ranges: Iterable<readonly [number, number]>): CharSet {
  const sorted = [...ranges].filter(([lo, hi]) => lo <= hi).sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [lo, hi] of sorted) {
    const last = merged.at(-1);
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else merged.push([lo, hi]);
  }
  return merged;
}

export function intersect(a: CharSet, b: CharSet): CharSet {
  const result: [number, number][] = [];
  for (const [alo, ahi] of a) {
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) result.push([lo, hi]);
    }
  }
  return normalize(result);
}

function complement(set: CharSet): CharSet {
  const gaps: [number, number][] = [];
  let next = 0;
  for (const [lo, hi] of normalize(set)) {
    if (lo > next) gaps.push([next, lo - 1]);
    next = hi + 1;
  }
  gaps.push([next, 0xffff]);
  return intersect(gaps, UNIVERSE);
}

const char = (code: number): CharSet => [[code, code]];
const DIGIT: CharSet = [[0x30, 0x39]];
const WORD: CharSet = normalize([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
const SPACE: CharSet = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
/** `.`: any character but the line terminators. */
const DOT = complement(
  normalize([
    [0x0a, 0x0a],
    [0x0d, 0x0d],
    [0x2028, 0x2029],
  ]),
);

// ---- parsing ----

const ANYTHING: Node = { kind: "repeat", node: { kind: "set", set: UNIVERSE }, min: 0, max: undefined };

class Parser {
  readonly #source: string;
  #index = 0;
  #end: number;

  constructor(source: string) {
    this.#source = source;
    this.#end = source.length;
  }

  parse(): Node {
    if (this.#source.length > MAX_PATTERN_LENGTH)
      throw new PatternError(`patterns longer than ${MAX_PATTERN_LENGTH} characters are not supported`);
    const node = this.#alternation(true);
    if (this.#index < this.#end) throw new PatternError(`unbalanced ")" at position ${this.#index}`);
    return node;
  }

  #peek(offset = 0): string | undefined {
    return this.#index + offset < this.#end ? this.#source[this.#index + offset] : undefined;
  }

  /** Alternatives; at the top level, each with its anchors or with any characters around it. */
  #alternation(top = false): Node {
    const options = [this.#sequence(top)];
    while (this.#peek() === "|") {
      this.#index++;
      options.push(this.#sequence(top));
    }
    return options.length === 1 ? (options[0] as Node) : { kind: "alt", options };
  }

  #sequence(top: boolean): Node {
    const items: Node[] = [];
    const anchoredStart = top && this.#peek() === "^";
    if (anchoredStart) this.#index++;
    let anchoredEnd = false;
    for (let next = this.#peek(); next !== undefined && next !== "|" && next !== ")"; next = this.#peek()) {
      if (top && next === "$" && [undefined, "|"].includes(this.#peek(1))) {
        this.#index++;
        anchoredEnd = true;
        break;
      }
      items.push(this.#quantified(this.#atom()));
    }
    if (top && !anchoredStart) items.unshift(ANYTHING);
    if (top && !anchoredEnd) items.push(ANYTHING);
    return items.length === 1 ? (items[0] as Node) : { kind: "seq", items };
  }

  #quantified(node: Node): Node {
    const quantifier = this.#quantifier();
    if (!quantifier) return node;
    if (this.#peek() === "?") this.#index++; // lazy: the same strings
    if (this.#quantifier(true)) throw new PatternError(`nothing to repeat at position ${this.#index}`);
    return { kind: "repeat", node, ...quantifier };
  }

  /** Reads a quantifier if one follows (only looks when `peekOnly`). */
  #quantifier(peekOnly = false): { min: number; max: number | undefined } | undefined {
    const next = this.#peek();
    const simple = next === "*" ? [0, undefined] : next === "+" ? [1, undefined] : next === "?" ? [0, 1] : undefined;
    if (simple) {
      if (!peekOnly) this.#index++;
      return { min: simple[0] as number, max: simple[1] };
    }
    if (next !== "{") return undefined;
    const match = /^\{(\d+)(,(\d*))?\}/.exec(this.#source.slice(this.#index, this.#end));
    if (!match) throw new PatternError(`a literal "{" must be escaped, at position ${this.#index}`);
    if (peekOnly) return { min: 0, max: 0 };
    this.#index += match[0].length;
    const min = Number(match[1]);
    const max = match[2] === undefined ? min : match[3] === "" ? undefined : Number(match[3]);
    if (min > MAX_QUANTIFIER || (max ?? 0) > MAX_QUANTIFIER)
      throw new PatternError(`quantifier counts above ${MAX_QUANTIFIER} are not supported`);
    if (max !== undefined && max < min) throw new PatternError(`quantifier {${min},${max}} is out of order`);
    return { min, max };
  }

  #atom(): Node {
    const start = this.#index;
    const next = this.#peek() as string;
    switch (next) {
      case "(":
        return this.#group();
      case "[":
        return { kind: "set", set: this.#class() };
      case ".":
        this.#index++;
        return { kind: "set", set: DOT };
      case "\\": {
        this.#index++;
        return { kind: "set", set: this.#escape(false) };
      }
      case "^":
      case "$":
        throw new PatternError(`anchors (^ and $) are only supported at the start and end of the pattern, not at position ${start}`);
      case "*":
      case "+":
      case "?":
      case "{":
        this.#quantifier(true);
        throw new PatternError(`nothing to repeat at position ${start}`);
      case "]":
      case "}":
        throw new PatternError(`a literal "${next}" must be escaped, at position ${start}`);
    }
    return { kind: "set", set: char(this.#literal()) };
  }

  #literal(): number {
    const code = this.#source.codePointAt(this.#index) as number;
    if (code > 0xffff || (code >= 0xd800 && code <= 0xdfff)) {
      throw new PatternError("characters beyond U+FFFF (and lone surrogates) are not supported in patterns");
    }
    this.#index++;
    return code;
  }

  #depth = 0;

  #group(): Node {
    if (++this.#depth > MAX_PATTERN_DEPTH) throw new PatternError(`groups nested more than ${MAX_PATTERN_DEPTH} deep are not supported`);
    this.#index++;
    if (this.#peek() === "?") {
      const kind = this.#source.slice(this.#index, this.#index + 3);
      if (kind.startsWith("?:")) this.#index += 2;
      else if (kind.startsWith("?=") || kind.startsWith("?!") || kind === "?<=" || kind === "?<!") {
        throw new PatternError("lookaround assertions cannot be enforced");
      } else if (kind.startsWith("?<")) {
        const close = this.#source.indexOf(">", this.#index);
        if (close === -1 || close >= this.#end) throw new PatternError("unterminated group name");
        this.#index = close + 1;
      } else throw new PatternError(`unsupported group syntax "(${kind}" at position ${this.#index - 1}`);
    }
    const node = this.#alternation();
    if (this.#peek() !== ")") throw new PatternError("unterminated group");
    this.#index++;
    this.#depth--;
    return node;
  }

  #class(): CharSet {
    this.#index++;
    const negated = this.#peek() === "^";
    if (negated) this.#index++;
    const ranges: (readonly [number, number])[] = [];
    for (;;) {
      const next = this.#peek();
      if (next === undefined) throw new PatternError("unterminated character class");
      if (next === "]") break;
      const first = this.#classAtom();
      if (this.#peek() === "-" && this.#peek(1) !== "]" && this.#peek(1) !== undefined) {
        this.#index++;
        const last = this.#classAtom();
        if (!isSingle(first) || !isSingle(last)) throw new PatternError("a class range must run between two characters");
        if (first[0][0] > last[0][0]) throw new PatternError("a class range is out of order");
        ranges.push([first[0][0], last[0][0]]);
      } else {
        ranges.push(...first);
      }
    }
    this.#index++;
    const set = intersect(normalize(ranges), UNIVERSE);
    return negated ? complement(set) : set;
  }

  #classAtom(): CharSet {
    if (this.#peek() !== "\\") return char(this.#literal());
    this.#index++;
    return this.#escape(true);
  }

  /** The escape after a backslash. */
  #escape(inClass: boolean): CharSet {
    const next = this.#peek();
    if (next === undefined) throw new PatternError("the pattern ends with a lone backslash");
    this.#index++;
    switch (next) {
      case "d":
        return DIGIT;
      case "D":
        return complement(DIGIT);
      case "w":
        return WORD;
      case "W":
        return complement(WORD);
      case "s":
        return SPACE;
      case "S":
        return complement(SPACE);
      case "n":
        return char(0x0a);
      case "r":
        return char(0x0d);
      case "t":
        return char(0x09);
      case "f":
        return char(0x0c);
      case "v":
        return char(0x0b);
      case "0":
        if (/\d/.test(this.#peek() ?? "")) throw new PatternError("octal escapes are not supported");
        return char(0);
      case "x":
      case "u": {
        const digits = next === "x" ? 2 : 4;
        const hex = this.#source.slice(this.#index, this.#index + digits);
        if (!new RegExp(`^[0-9A-Fa-f]{${digits}}$`).test(hex)) throw new PatternError(`malformed \\${next} escape`);
        this.#index += digits;
        const code = Number.parseInt(hex, 16);
        if (code >= 0xd800 && code <= 0xdfff) throw new PatternError("surrogate escapes are not supported in patterns");
        return char(code);
      }
      case "b":
        if (inClass) return char(0x08);
        throw new PatternError("word boundaries (\\b) cannot be enforced");
    }
    if (/[1-9]/.test(next) || next === "k") throw new PatternError("backreferences cannot be enforced");
    if (next === "B") throw new PatternError("word boundaries (\\B) cannot be enforced");
    if (next === "p" || next === "P") throw new PatternError("Unicode property escapes are not supported");
    if (/[A-Za-z]/.test(next)) throw new PatternError(`unsupported escape \\${next}`);
    this.#index--;
    return char(this.#literal()); // an escaped punctuation character stands for itself
  }
}

function isSingle(set: CharSet): set is readonly [readonly [number, number]] {
  return set.length === 1 && (set[0] as readonly [number, number])[0] === (set[0] as readonly [number, number])[1];
}

// ---- automata ----

interface EpsilonFree {
  accepting: boolean[];
  moves: { set: CharSet; to: number }[][];
}

/** Thompson's construction, then the empty moves removed. */
function epsilonFree(node: Node): EpsilonFree {
  const empty: number[][] = [];
  const moves: { set: CharSet; to: number }[][] = [];
  const state = () => {
    if (empty.length >= MAX_AUTOMATON_STATES * 4) throw new PatternError("the pattern is too large to enforce");
    empty.push([]);
    moves.push([]);
    return empty.length - 1;
  };
  const build = (current: Node, from: number): number => {
    switch (current.kind) {
      case "set": {
        const to = state();
        if (current.set.length > 0) (moves[from] as { set: CharSet; to: number }[]).push({ set: current.set, to });
        return to;
      }
      case "seq":
        return current.items.reduce((at, item) => build(item, at), from);
      case "alt": {
        const end = state();
        for (const option of current.options) (empty[build(option, from)] as number[]).push(end);
        return end;
      }
      case "repeat": {
        let at = from;
        for (let count = 0; count < current.min; count++) at = build(current.node, at);
        if (current.max === undefined) {
          const loop = state();
          (empty[at] as number[]).push(loop);
          (empty[build(current.node, loop)] as number[]).push(loop);
          return loop;
        }
        const end = state();
        for (let count = current.min; count < current.max; count++) {
          (empty[at] as number[]).push(end);
          at = build(current.node, at);
        }
        (empty[at] as number[]).push(end);
        return end;
      }
    }
  };
  const start = state();
  const accept = build(node, start);
  const closure = (from: number): Set<number> => {
    const seen = new Set([from]);
    for (const at of seen) for (const next of empty[at] as number[]) seen.add(next);
    return seen;
  };
  // Renumber: the start, then targets of character moves as they are reached.
  const index = new Map([[start, 0]]);
  const order = [start];
  const result: EpsilonFree = { accepting: [], moves: [] };
  for (let position = 0; position < order.length; position++) {
    const reach = closure(order[position] as number);
    result.accepting.push(reach.has(accept));
    const out: { set: CharSet; to: number }[] = [];
    for (const at of reach) {
      for (const move of moves[at] as { set: CharSet; to: number }[]) {
        if (!index.has(move.to)) {
          index.set(move.to, order.length);
          order.push(move.to);
        }
        out.push({ set: move.set, to: index.get(move.to) as number });
      }
    }
    result.moves.push(out);
  }
  return result;
}

/**
 * The intersection of the components and of the length bounds, over UNIVERSE, with dead states
 * removed and moves to one target merged.
 */
function product(components: readonly EpsilonFree[], minLength: number, maxLength: number | undefined): StringAutomaton {
  const cap = maxLength ?? minLength;
  const keys = new Map<string, number>();
  const tuples: number[][] = [];
  const counts: number[] = [];
  const intern = (tuple: number[], count: number): number => {
    const key = `${tuple.join(",")}:${count}`;
    let id = keys.get(key);
    if (id === undefined) {
      if (tuples.length >= MAX_AUTOMATON_STATES) {
        throw new PatternError(
          `the pattern, format and length keywords of this schema together are too complex to enforce (over ${MAX_AUTOMATON_STATES} states)`,
        );
      }
      id = tuples.length;
      keys.set(key, id);
      tuples.push(tuple);
      counts.push(count);
    }
    return id;
  };
  intern(
    components.map(() => 0),
    0,
  );
  const accepting: boolean[] = [];
  const edges: Map<number, CharSet>[] = [];
  for (let id = 0; id < tuples.length; id++) {
    const tuple = tuples[id] as number[];
    const count = counts[id] as number;
    accepting.push(count >= minLength && components.every((component, index) => component.accepting[tuple[index] as number]));
    const out = new Map<number, CharSet>();
    edges.push(out);
    const next = maxLength === undefined ? Math.min(count + 1, cap) : count + 1;
    if (maxLength !== undefined && next > maxLength) continue;
    const extend = (index: number, set: CharSet, targets: number[]) => {
      if (set.length === 0) return;
      if (index === components.length) {
        const to = intern(targets, next);
        out.set(to, normalize([...(out.get(to) ?? []), ...set]));
        return;
      }
      const component = components[index] as EpsilonFree;
      for (const move of component.moves[tuple[index] as number] as { set: CharSet; to: number }[]) {
        extend(index + 1, intersect(set, move.set), [...targets, move.to]);
      }
    };
    extend(0, UNIVERSE, []);
  }
  // Keep the states from which an accepting state can be reached.
  const live = accepting.map((value) => value);
  for (let changed = true; changed;) {
    changed = false;
    for (const [id, out] of edges.entries()) {
      if (!live[id] && [...out.keys()].some((to) => live[to])) {
        live[id] = true;
        changed = true;
      }
    }
  }
  if (!live[0]) return { states: [] };
  const renumbered = new Map<number, number>();
  for (const [id, isLive] of live.entries()) if (isLive) renumbered.set(id, renumbered.size);
  const states: AutomatonState[] = [];
  for (const [id, isLive] of live.entries()) {
    if (!isLive) continue;
    const moves = [...(edges[id] as Map<number, CharSet>)]
      .filter(([to]) => live[to])
      .map(([to, set]) => ({ set, to: renumbered.get(to) as number }));
    states.push({ accepting: accepting[id] as boolean, moves });
  }
  return { states };
}

/**
 * Each supported format as a pattern of the subset above, with the same strings as its grammar
 * in src/engine/jsonSchemaToGbnf.ts (LIBRARY), for intersecting a format with a pattern or lengths.
 */
const DATE =
  String.raw`(?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|1\d|2[0-8]|29|30|31)|(?:0[469]|11)-(?:0[1-9]|1\d|2[0-8]|29|30)|02-(?:0[1-9]|1\d|2[0-8]))` +
  String.raw`|(?:\d{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)`;
const HOUR = String.raw`(?:[01]\d|2[0-3])`;
const TIME = String.raw`${HOUR}:[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+\-]${HOUR}:[0-5]\d)`;
const LABEL = String.raw`[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?`;
const ATEXT = String.raw`[A-Za-z0-9!#$%&'*+/=?^_\x60{|}~\-]`;
const OCTET = String.raw`(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)`;

export const FORMAT_PATTERNS: Readonly<Record<string, string>> = {
  date: DATE,
  time: TIME,
  "date-time": `${DATE}T${TIME}`,
  uuid: "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
  email: String.raw`(?:${ATEXT}{1,64}|${ATEXT}{1,15}(?:\.${ATEXT}{1,15}){1,3})@${LABEL}(?:\.${LABEL}){1,2}`,
  hostname: String.raw`${LABEL}(?:\.${LABEL}){0,2}`,
  ipv4: String.raw`${OCTET}\.${OCTET}\.${OCTET}\.${OCTET}`,
};

/**
 * The same formats for strings of at most SHORT_STRING characters, where the length limits of
 * e-mail addresses and host names (64 for a local part, 63 for a label, 255 for a domain) hold
 * anyway: without counting to them, the automaton intersected with maxLength stays small.
 */
export const SHORT_STRING = 63;
const ANY_LABEL = String.raw`[a-z0-9](?:[a-z0-9\-]*[a-z0-9])?`;
export const SHORT_FORMAT_PATTERNS: Readonly<Record<string, string>> = {
  ...FORMAT_PATTERNS,
  email: String.raw`${ATEXT}+(?:\.${ATEXT}+)*@${ANY_LABEL}(?:\.${ANY_LABEL})+`,
  hostname: String.raw`${ANY_LABEL}(?:\.${ANY_LABEL})*`,
};
