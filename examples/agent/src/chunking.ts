// Splits a document into overlapping chunks on paragraph and sentence boundaries, so that each
// chunk reads as whole sentences and a fact cut by a chunk border is still whole in one of them.

export interface ChunkOptions {
  /** Largest chunk in characters (a sentence longer than this is cut at word boundaries). */
  maxChars: number;
  /** Characters of trailing whole sentences repeated at the start of the next chunk. */
  overlapChars: number;
}

/** About 250 tokens of English: small enough for any embedding model's context, big enough to carry a fact. */
export const DEFAULT_CHUNKING: ChunkOptions = { maxChars: 1000, overlapChars: 200 };

interface Unit {
  text: string;
  /** Whether a paragraph ends after this sentence (joined with a blank line, not a space). */
  endsParagraph: boolean;
}

export function chunkText(text: string, options: ChunkOptions = DEFAULT_CHUNKING): string[] {
  const units = toUnits(text, options.maxChars);
  const chunks: string[] = [];
  let current: Unit[] = [];
  let length = 0;
  for (const unit of units) {
    if (current.length > 0 && length + unit.text.length + 2 > options.maxChars) {
      chunks.push(join(current));
      current = overlapTail(current, options.overlapChars);
      length = current.reduce((sum, item) => sum + item.text.length + 2, 0);
    }
    current.push(unit);
    length += unit.text.length + 2;
  }
  if (current.length > 0) chunks.push(join(current));
  return chunks;
}

function toUnits(text: string, maxChars: number): Unit[] {
  const paragraphs = text
    .replace(/\r\n?/g, "\n")
    .split(/\n\s*\n/)
    .map((paragraph) => paragraph.trim())
    .filter((paragraph) => paragraph.length > 0);
  return paragraphs.flatMap((paragraph) => {
    const sentences = paragraph.split(/(?<=[.!?])\s+/).flatMap((sentence) => cutLong(sentence, maxChars));
    return sentences.map((sentence, index) => ({ text: sentence, endsParagraph: index === sentences.length - 1 }));
  });
}

/** A sentence longer than a chunk is cut at spaces (or anywhere, for a single huge word). */
function cutLong(sentence: string, maxChars: number): string[] {
  const pieces: string[] = [];
  let rest = sentence;
  while (rest.length > maxChars) {
    const space = rest.lastIndexOf(" ", maxChars);
    const cut = space > 0 ? space : maxChars;
    pieces.push(rest.slice(0, cut));
    rest = rest.slice(cut).trimStart();
  }
  if (rest.length > 0) pieces.push(rest);
  return pieces;
}

/** The trailing whole sentences that fit in the overlap, never the whole chunk (that would not advance). */
function overlapTail(units: Unit[], overlapChars: number): Unit[] {
  const tail: Unit[] = [];
  let length = 0;
  for (let i = units.length - 1; i > 0; i--) {
    const unit = units[i]!;
    if (length + unit.text.length > overlapChars) break;
    tail.unshift(unit);
    length += unit.text.length + 2;
  }
  return tail;
}

function join(units: Unit[]): string {
  return units.map((unit, i) => unit.text + (i === units.length - 1 ? "" : unit.endsParagraph ? "\n\n" : " ")).join("");
}
