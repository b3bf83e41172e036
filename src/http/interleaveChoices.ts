import type { ChatEvent, ChatStream } from "../core/ChatEvent.js";

type Pulled = { choice: number; result: IteratorResult<ChatEvent, void> } | { choice: number; error: unknown };

/**
 * The events of several choices as they come, each tagged with its choice. Every stream always has
 * one read in flight, so all of them keep decoding (their sequences share batches) whichever the
 * consumer is writing. The first failure of any stream is thrown; closing the streams stays with
 * their owner.
 */
export async function* interleaveChoices(
  streams: readonly ChatStream[],
): AsyncGenerator<{ choice: number; event: ChatEvent }, void, undefined> {
  if (streams.length === 1) {
    // One choice (the common case): no racing.
    const stream = streams[0]!;
    for (let result = await stream.next(); !result.done; result = await stream.next()) yield { choice: 0, event: result.value };
    return;
  }
  const pending = new Map<number, Promise<Pulled>>();
  const pull = (choice: number) =>
    pending.set(
      choice,
      streams[choice]!.next().then(
        (result) => ({ choice, result }),
        (error: unknown) => ({ choice, error }),
      ),
    );
  streams.forEach((_, choice) => pull(choice));
  while (pending.size > 0) {
    const pulled = await Promise.race(pending.values());
    if ("error" in pulled) throw pulled.error;
    if (pulled.result.done) {
      pending.delete(pulled.choice);
      continue;
    }
    pull(pulled.choice);
    yield { choice: pulled.choice, event: pulled.result.value };
  }
}
