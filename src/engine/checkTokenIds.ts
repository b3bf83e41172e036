import type { LlamaModel } from "node-llama-cpp";
import { ServerError } from "../core/ServerError.js";

/** Token ids are the model's own; an id outside its vocabulary is the caller's mistake, named by `param`. */
export function checkTokenIds(model: LlamaModel, tokens: Iterable<number>, param: string): void {
  const size = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
  for (const token of tokens) {
    if (token >= size) {
      throw new ServerError("invalid_request", {
        param,
        message: `Invalid value for '${param}': token id ${token} is outside this model's vocabulary (ids 0 to ${size - 1}).`,
      });
    }
  }
}
