import type { DetokenizeRequest, DetokenizeResult, TokenizeRequest, TokenizeResult } from "../../core/TokenizeRequest.js";
import { parseBody } from "../parseBody.js";
import { detokenizeRequestSchema, tokenizeRequestSchema, type DetokenizeResponse, type TokenizeResponse } from "./schemas.js";

/** POST /tokenize, with llama-server's defaults: no special tokens added, special-token text parsed. */
export function fromTokenizeRequest(body: unknown): TokenizeRequest {
  const wire = parseBody(tokenizeRequestSchema, body);
  return {
    model: wire.model,
    content: wire.content,
    addSpecial: wire.add_special ?? false,
    parseSpecial: wire.parse_special ?? true,
    withPieces: wire.with_pieces ?? false,
  };
}

export function fromDetokenizeRequest(body: unknown): DetokenizeRequest {
  const wire = parseBody(detokenizeRequestSchema, body);
  return { model: wire.model, tokens: wire.tokens };
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

export function toTokenizeResponse(result: TokenizeResult): TokenizeResponse {
  const { tokens, pieces } = result;
  if (pieces === undefined) return { tokens };
  return { tokens: tokens.map((id, index) => ({ id, piece: pieceValue(pieces[index] ?? []) })) };
}

/** The piece as text when its bytes are valid UTF-8 by themselves, else the byte values (part of a character). */
function pieceValue(bytes: readonly number[]): string | number[] {
  try {
    return strictUtf8.decode(Uint8Array.from(bytes));
  } catch {
    return [...bytes];
  }
}

export function toDetokenizeResponse(result: DetokenizeResult): DetokenizeResponse {
  return { content: result.content };
}
