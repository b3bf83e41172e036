import type { EmbedRequest } from "../../core/EmbedRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { parseBody } from "../parseBody.js";
import { embeddingRequestSchema } from "./schemas.js";

/** OpenAI's limit on inputs per request. */
const MAX_EMBEDDING_INPUTS = 2048;

export interface ParsedEmbeddingRequest {
  embed: EmbedRequest;
  encoding: "float" | "base64";
}

/** Validates an embeddings body and translates it to the engine's request. */
export function fromEmbeddingRequest(body: unknown): ParsedEmbeddingRequest {
  const wire = parseBody(embeddingRequestSchema, body);

  // A flat array of numbers is one input of token ids, not several inputs.
  const inputs = typeof wire.input === "string" || isTokenIds(wire.input) ? [wire.input] : wire.input;
  if (inputs.length === 0) {
    throw new ServerError("invalid_request", { param: "input", message: "Invalid value for 'input': it must not be empty." });
  }
  if (inputs.length > MAX_EMBEDDING_INPUTS) {
    throw new ServerError("invalid_request", {
      param: "input",
      message: `Invalid value for 'input': at most ${MAX_EMBEDDING_INPUTS} inputs per request, got ${inputs.length}.`,
    });
  }
  inputs.forEach((input, index) => {
    if (input.length === 0) {
      const param = inputs.length === 1 && !Array.isArray(wire.input) ? "input" : `input[${index}]`;
      throw new ServerError("invalid_request", { param, message: `Invalid value for '${param}': an input must not be empty.` });
    }
  });
  return {
    embed: {
      model: wire.model,
      inputs,
      ...(wire.dimensions == null ? {} : { dimensions: wire.dimensions }),
      truncate: wire.truncate ?? false,
    },
    encoding: wire.encoding_format ?? "float",
  };
}

function isTokenIds(input: readonly unknown[]): input is number[] {
  return input.length > 0 && typeof input[0] === "number";
}
