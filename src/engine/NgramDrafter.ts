import type { Token } from "node-llama-cpp";
import type { Drafter } from "./BatchDecoder.js";
import { DraftLength } from "./DraftLength.js";

/**
 * Drafts for one generation by prompt lookup (n-gram speculation): the tokens that followed the
 * latest earlier occurrence of the sequence's last few tokens, in the prompt or the reply so far.
 * Where a reply copies its input (a rewrite, an edit of code, an answer quoting retrieved
 * passages), the model then checks several tokens in one decode instead of writing one.
 */
export class NgramDrafter extends DraftLength implements Drafter {
  /**
   * Up to `room` tokens to check after `next`, the token the sequence decodes now (after
   * `history`, what its cache holds); none when no n-gram matches or the drafter is pausing.
   */
  draft(history: readonly Token[], next: Token, room: number): Token[] {
    const length = this.next(room, history.length);
    if (length <= 0) return [];
    const end = history.length + 1;
    const at = (i: number) => (i === history.length ? next : history[i]!);
    for (let n = MAX_NGRAM; n >= MIN_NGRAM; n--) {
      if (end <= n) continue;
      // The latest earlier start of the last n tokens, searched back from the end.
      for (let start = end - n - 1; start >= 0; start--) {
        let k = 0;
        while (k < n && at(start + k) === at(end - n + k)) k++;
        if (k < n) continue;
        const draft: Token[] = [];
        for (let i = start + n; i < end && draft.length < length; i++) {
          const token = at(i);
          // An image's pseudo-tokens (negative) are no text to draft.
          if (token < 0) break;
          draft.push(token);
        }
        if (draft.length > 0) return draft;
      }
    }
    return [];
  }
}

/**
 * The n-gram sizes matched, longest first: 3 tokens pin a place in a passage (a word and its
 * neighbours); 2 still finds one where the reply has just left the copied text by a token. One
 * token alone matches too much of any text to predict what follows.
 */
const MAX_NGRAM = 3;
const MIN_NGRAM = 2;
