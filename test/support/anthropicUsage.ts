/**
 * The whole prompt of a Messages reply: `input_tokens` leaves out what the prompt cache served
 * (`cache_read_input_tokens`), as Anthropic and llama-server count, so the two add up to what
 * count_tokens returns.
 */
export function wholePrompt(usage: { input_tokens: number | null; cache_read_input_tokens?: number | null }): number {
  return (usage.input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
}
