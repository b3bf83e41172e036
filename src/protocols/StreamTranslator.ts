import { ServerError } from "../core/ServerError.js";

/**
 * Turns the events of one generation into one protocol's streamed chunks, one wire object per
 * chunk (the writer frames them: SSE, NDJSON). Every streamed format has one, named `XxxStream`
 * after the format (ChatCompletionStream, TextCompletionStream, MessageStream, NativeReplyStream,
 * ResponseStream), and http/pumpStream.ts is the one loop that drives them: `start()`, `next()`
 * for each event in order, `end()` once the events ran out. Errors are not a translator's: the
 * pump sends them in the route's error shape. A non-streamed reply that is built from the same
 * chunks (a Message, a native reply, a response object) uses the same translator, so both forms
 * always agree.
 */
export interface StreamTranslator<Event, Chunk> {
  /** The chunks sent before the first event (a `message_start`, a `response.created`); often none. */
  start(): Chunk[];
  /** The chunks one event becomes (none, while a call's arguments are gathered whole). May wait, e.g. to store the response before its last event goes out. */
  next(event: Event): Chunk[] | Promise<Chunk[]>;
  /** The chunks after the last event (the usage chunk of stream_options.include_usage); often none. */
  end(): Chunk[];
}

/** The error of a generation whose events ended without their `done`: a reply that cannot be completed. */
export function endedWithoutResult(): ServerError {
  return new ServerError("internal_error", { message: "The generation ended without a result." });
}
