import type { AdmissionTicket } from "../core/Engine.js";

/**
 * One admission shared by `n` requests (the n choices of one request, each its own upstream
 * request): each share is settled once, and the admission is settled once all are, with the prompt
 * once (every choice reads the same one; the largest count reported, as a failed choice reports
 * none) and every choice's completion tokens, as the engine settles its own choices. Settling a
 * share again does nothing, so a caller cleaning up after a failure may settle every share.
 */
export function shareTicket(ticket: AdmissionTicket | undefined, n: number): Array<AdmissionTicket | undefined> {
  if (!ticket) return new Array<undefined>(n).fill(undefined);
  let open = n;
  let promptTokens = 0;
  let completionTokens = 0;
  return Array.from({ length: n }, () => {
    let settled = false;
    return {
      maxOutputTokens: Math.floor(ticket.maxOutputTokens / n),
      settle(usage) {
        if (settled) return;
        settled = true;
        promptTokens = Math.max(promptTokens, usage.promptTokens);
        completionTokens += usage.completionTokens;
        if (--open === 0) ticket.settle({ promptTokens, completionTokens });
      },
    };
  });
}
