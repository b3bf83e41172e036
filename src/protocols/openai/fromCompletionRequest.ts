import type { ChatRequest, PromptOverride } from "../../core/ChatRequest.js";
import { ServerError } from "../../core/ServerError.js";
import { parseBody } from "../parseBody.js";
import { commonRequestFields } from "./commonRequestFields.js";
import { completionRequestSchema } from "./schemas.js";

export interface ParsedCompletionRequest {
  /** One engine request per prompt, each with `n` choices; their choices are numbered on in this order. */
  prompts: ChatRequest[];
  stream: boolean;
  includeUsage: boolean;
  /** Legacy `logprobs`: how many alternatives per token (0-5), or undefined when not asked. */
  logprobs: number | undefined;
  /** The prompt comes back before the completion (with logprobs: the prompt's tokens scored, the first null). */
  echo: boolean;
}

/** More prompts than this in one request are refused: each is decoded in turn. */
const MAX_PROMPTS = 32;

/** OpenAI's default for the legacy endpoint. */
const DEFAULT_MAX_TOKENS = 16;

/** Validates a legacy completions body and translates it to one engine request per prompt, no chat template. */
export function fromCompletionRequest(body: unknown): ParsedCompletionRequest {
  const wire = parseBody(completionRequestSchema, body);
  const { stream, includeUsage, stop, sampling, adapters } = commonRequestFields(wire);
  const n = wire.n ?? 1;
  if (wire.best_of != null && wire.best_of !== n) {
    throw new ServerError("invalid_request", {
      param: "best_of",
      message:
        "Invalid value for 'best_of': choosing the best of several candidates is not supported; leave it out or set it equal to 'n'.",
    });
  }
  const suffix = wire.suffix == null || wire.suffix === "" ? undefined : wire.suffix;
  if (suffix !== undefined && wire.echo === true) {
    throw new ServerError("invalid_request", { param: "echo", message: "Invalid value for 'echo': echo cannot be used with 'suffix'." });
  }
  const prompts = toPrompts(wire.prompt, suffix);
  return {
    prompts: prompts.map((prompt) => ({
      model: wire.model,
      messages: [],
      prompt,
      maxTokens: wire.max_tokens ?? DEFAULT_MAX_TOKENS,
      stop,
      sampling,
      ...adapters,
      tools: [],
      toolChoice: { type: "none" },
      parallelToolCalls: false,
      responseFormat: { type: "text" },
      n,
      ...(wire.echo === true ? { echo: true } : {}),
      ...(wire.logprobs == null ? {} : { logprobs: { top: wire.logprobs } }),
    })),
    stream,
    includeUsage,
    logprobs: wire.logprobs ?? undefined,
    echo: wire.echo === true,
  };
}

function toPrompts(prompt: string | string[] | number[] | number[][], suffix: string | undefined): PromptOverride[] {
  const list: Array<string | number[]> =
    typeof prompt === "string" ? [prompt] : typeof prompt[0] === "number" ? [prompt as number[]] : (prompt as string[] | number[][]);
  if (list.length > MAX_PROMPTS) {
    throw new ServerError("invalid_request", {
      param: "prompt",
      message: `Invalid value for 'prompt': at most ${MAX_PROMPTS} prompts may be sent in one request; got ${list.length}.`,
    });
  }
  return list.map((each): PromptOverride => {
    if (typeof each !== "string") {
      if (suffix !== undefined) {
        throw new ServerError("invalid_request", {
          param: "suffix",
          message: "Invalid value for 'suffix': fill-in-the-middle needs the prompt as text, not token ids.",
        });
      }
      return { type: "tokens", tokens: each };
    }
    return suffix === undefined ? { type: "raw", text: each } : { type: "infill", prefix: each, suffix };
  });
}
