import type { AdapterChoice, SamplingOptions } from "../../core/ChatRequest.js";
import { ServerError } from "../../core/ServerError.js";

/** The fields chat completions and legacy completions share, as their schemas parse them. */
export interface CommonWireFields {
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  stop?: string | string[] | null;
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  logit_bias?: Record<string, number> | null;
  lora?: AdapterChoice[] | null;
}

/** Streaming, stop sequences and sampling, read the same way for both endpoints. */
export function commonRequestFields(wire: CommonWireFields): {
  stream: boolean;
  includeUsage: boolean;
  stop: string[];
  sampling: SamplingOptions;
  /** The request's adapters (ChatRequest.lora), when it names any. */
  adapters: { lora?: AdapterChoice[] };
} {
  const stream = wire.stream === true;
  if (wire.stream_options != null && !stream) {
    throw new ServerError("invalid_request", {
      param: "stream_options",
      message: "The 'stream_options' parameter is only allowed when 'stream' is true.",
    });
  }
  const stop = wire.stop == null ? [] : typeof wire.stop === "string" ? [wire.stop] : wire.stop;
  if (stop.includes(""))
    throw new ServerError("invalid_request", { param: "stop", message: "Invalid value for 'stop': stop sequences must not be empty." });
  return {
    stream,
    includeUsage: stream && wire.stream_options?.include_usage === true,
    stop,
    sampling: {
      // OpenAI's defaults: temperature 1 and top_p 1 when the caller sends none.
      temperature: wire.temperature ?? 1,
      topP: wire.top_p ?? 1,
      seed: wire.seed ?? undefined,
      presencePenalty: wire.presence_penalty ?? 0,
      frequencyPenalty: wire.frequency_penalty ?? 0,
      logitBias: new Map(Object.entries(wire.logit_bias ?? {}).map(([token, bias]) => [Number(token), bias])),
    },
    adapters: wire.lora == null ? {} : { lora: wire.lora },
  };
}
