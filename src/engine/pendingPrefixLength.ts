/**
 * Length of the longest suffix of `text` that is a proper prefix of `delimiter`: how much of a
 * streamed text must be held back because the next piece may complete the delimiter.
 */
export function pendingPrefixLength(text: string, delimiter: string): number {
  for (let length = Math.min(delimiter.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(delimiter.slice(0, length))) return length;
  }
  return 0;
}
