import type { PromptPreview } from "../../core/Engine.js";

/** llama-server's `POST /apply-template` answer: the prompt the model would read for a chat completion's body. */
export interface ApplyTemplateResponse {
  prompt: string;
}

export function toApplyTemplateResponse(preview: PromptPreview): ApplyTemplateResponse {
  return { prompt: preview.text };
}
