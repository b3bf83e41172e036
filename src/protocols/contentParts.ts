import type { MessageImage } from "../core/ChatRequest.js";

/** A message's part as the wire formats list them: text, or an image (where the text stands). */
export type ContentPart = { text: string } | { image: Omit<MessageImage, "at"> };

/**
 * A user message's text and images from its parts. Text parts are joined by a newline, as vLLM and
 * llama-server join them; an image stands between parts with no newline beside it, as llama-server
 * writes its image marker (common/chat.cpp), so the prompt's tokens are the ones it would give.
 */
export function joinContentParts(parts: readonly ContentPart[]): { content: string; images?: MessageImage[] } {
  let content = "";
  let afterText = false;
  const images: MessageImage[] = [];
  for (const part of parts) {
    if ("image" in part) {
      images.push({ ...part.image, at: content.length });
      afterText = false;
    } else {
      content += (afterText ? "\n" : "") + part.text;
      afterText = true;
    }
  }
  return images.length > 0 ? { content, images } : { content };
}
