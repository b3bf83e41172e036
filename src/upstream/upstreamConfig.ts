import { readFile } from "node:fs/promises";
import { z } from "zod";
import { CodedError } from "../core/CodedError.js";
import { isValidModelName } from "../core/modelName.js";

/**
 * The upstreams file (--upstreams): per model name the clients use, a pool of OpenAI-compatible
 * endpoints that serve it (modelhost workers, llama-server, vLLM, SGLang, Ollama's /v1, LM Studio):
 *
 * ```json
 * { "models": { "qwen2.5-7b": { "model": "Qwen/Qwen2.5-7B-Instruct", "endpoints": [
 *     { "url": "http://10.0.0.5:8000/v1", "key": "…", "weight": 2, "maxConcurrent": 64 },
 *     { "url": "http://10.0.0.6:8080/v1" } ], "routing": "affinity" } } }
 * ```
 */
const endpointSchema = z.object({
  url: z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, "")),
  /** What error messages call it (default its place in the pool, #1, #2, …): clients are never told its URL. */
  name: z.string().min(1).max(100).optional(),
  key: z.string().min(1).optional(),
  weight: z.number().positive().max(1000).default(1),
  maxConcurrent: z.number().int().positive().max(100_000).default(64),
});

const modelSchema = z.object({
  /** The upstream's own name for the model (vLLM's served name); default the name clients use. */
  model: z.string().min(1).optional(),
  endpoints: z.array(endpointSchema).min(1),
  /**
   * What its endpoints serve, as the model listings report it: chat (chat and legacy completions),
   * embeddings, rerank, and vision (chat reads images). A request for anything else is a 400 here,
   * not a guess at what the endpoint might do.
   */
  capabilities: z
    .array(z.enum(["chat", "embeddings", "rerank", "vision"]))
    .min(1)
    .default(["chat"])
    .refine((capabilities) => !capabilities.includes("vision") || capabilities.includes("chat"), "vision needs chat"),
  /**
   * What the endpoints' rerank scores are: probabilities (vLLM, modelhost), or the model's relevance
   * logits (llama-server), which are turned into probabilities here.
   */
  rerankScores: z.enum(["probability", "logit"]).default("probability"),
  /**
   * `affinity` (the pool's default): a conversation stays on the endpoint holding its prompt cache;
   * `round-robin`: the endpoints in turn (EndpointPool). Optional rather than defaulted here, so that
   * models built in code (tests) need not spell it.
   */
  routing: z.enum(["affinity", "round-robin"]).optional(),
});

const fileSchema = z.object({ models: z.record(z.string(), modelSchema) });

export type UpstreamModels = ReadonlyMap<string, z.infer<typeof modelSchema>>;

/** The upstreams file is missing or malformed: the server does not start (or, on SIGHUP, keeps the one it has). */
export class UpstreamConfigError extends CodedError<"invalid_setting"> {
  override name = "UpstreamConfigError";
  readonly code = "invalid_setting";
}

/** Reads and checks the upstreams file; its model names must be valid model names. */
export async function readUpstreams(file: string): Promise<UpstreamModels> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, "utf8"));
  } catch (error) {
    throw new UpstreamConfigError(`The upstreams file ${file} cannot be read: ${(error as Error).message}.`);
  }
  const result = fileSchema.safeParse(parsed);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new UpstreamConfigError(`The upstreams file ${file} is invalid at ${issue.path.join(".") || "its top"}: ${issue.message}.`);
  }
  for (const name of Object.keys(result.data.models)) {
    if (!isValidModelName(name))
      throw new UpstreamConfigError(`The upstreams file ${file} names a model "${name}", which is not a valid model name.`);
  }
  return new Map(Object.entries(result.data.models));
}
