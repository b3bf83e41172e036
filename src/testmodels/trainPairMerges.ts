export interface TrainingWord {
  symbols: string[];
  frequency: number;
}

/**
 * The training loop BPE and WordPiece share: repeatedly merge the most frequent adjacent pair of
 * symbols across the words (ties broken by the pair's text, so the result is deterministic),
 * stopping early if no pair occurs twice. `join` spells a merged pair (WordPiece drops the "##" of
 * the right symbol). Returns the pairs in the order they were learned; `words` is consumed.
 */
export function trainPairMerges(
  words: TrainingWord[],
  count: number,
  join: (left: string, right: string) => string = (left, right) => left + right,
): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  while (pairs.length < count) {
    const best = mostFrequentPair(words);
    if (best === undefined) break;
    const [left, right] = best.split(" ") as [string, string];
    pairs.push([left, right]);
    for (const word of words) word.symbols = mergePair(word.symbols, left, right, join);
  }
  return pairs;
}

function mostFrequentPair(words: readonly TrainingWord[]): string | undefined {
  const pairCounts = new Map<string, number>();
  for (const { symbols, frequency } of words) {
    for (let i = 0; i + 1 < symbols.length; i++) {
      const pair = `${symbols[i]} ${symbols[i + 1]}`;
      pairCounts.set(pair, (pairCounts.get(pair) ?? 0) + frequency);
    }
  }
  let best: string | undefined;
  let bestCount = 1;
  for (const [pair, pairCount] of pairCounts) {
    if (pairCount > bestCount || (pairCount === bestCount && best !== undefined && pair < best)) {
      best = pair;
      bestCount = pairCount;
    }
  }
  return best;
}

function mergePair(symbols: readonly string[], left: string, right: string, join: (left: string, right: string) => string): string[] {
  const merged: string[] = [];
  for (let i = 0; i < symbols.length; i++) {
    if (symbols[i] === left && symbols[i + 1] === right) {
      merged.push(join(left, right));
      i++;
    } else {
      merged.push(symbols[i] ?? "");
    }
  }
  return merged;
}
