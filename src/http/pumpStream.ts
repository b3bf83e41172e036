import type { FastifyBaseLogger } from "fastify";
import type { StreamTranslator } from "../protocols/StreamTranslator.js";
import type { StreamingResponse } from "./StreamingResponse.js";
import { toServerError } from "./toServerError.js";

export interface PumpOptions {
  /** The request's signal: once it is aborted (the client left, or shutdown cut the stream and sent its own error) nothing more is written. */
  signal: AbortSignal;
  log: FastifyBaseLogger;
}

/**
 * The one loop of every streamed reply (as Ollama's `streamResponse` is): starts the writer, sends
 * the translator's opening chunks, each event's chunks, its closing chunks, and finishes the
 * writer (OpenAI's `[DONE]`). It stops as soon as a write finds the client gone. An error once the
 * stream has started cannot change the status any more: it travels as one last event in the
 * writer's error shape (StreamingResponse.fail, which shutdown's Drain uses too), unless the
 * request was aborted. The writer is ended on every way out; closing the events (their decoding
 * slots) stays with the route that opened them.
 */
export async function pumpStream<Event, Chunk>(
  writer: StreamingResponse,
  events: AsyncIterable<Event>,
  translator: StreamTranslator<Event, Chunk>,
  { signal, log }: PumpOptions,
): Promise<void> {
  writer.start();
  try {
    for (const chunk of translator.start()) if (!(await writer.send(chunk))) return;
    for await (const event of events) {
      for (const chunk of await translator.next(event)) if (!(await writer.send(chunk))) return;
    }
    for (const chunk of translator.end()) if (!(await writer.send(chunk))) return;
    await writer.finish();
  } catch (error) {
    if (!signal.aborted) {
      log.error({ err: error }, "stream failed");
      await writer.fail(toServerError(error));
    }
  } finally {
    writer.end();
  }
}
