import type { Token } from "node-llama-cpp";
import type { CallSyntax, ThoughtMarkers } from "../../chatTemplates/chatFormats.js";
import type { ChatRequest, ToolDefinition } from "../../core/ChatRequest.js";
import type { PromptImages } from "../BatchDecoder.js";

export interface RenderedPrompt {
  /** The prompt's tokens; an image's as its pseudo-tokens (see PromptImages). */
  tokens: Token[];
  /** The images among the tokens, for a vision model's prompt that shows any. */
  images?: PromptImages;
  /**
   * The text the chat template rendered, as transformers renders it (POST /apply-template shows
   * it); absent where no Jinja template rendered the prompt: the tokens' text stands for it.
   */
  text?: string;
  /** Control tokens that end the turn in this template (e.g. `<|im_end|>`), besides end-of-generation ones. */
  stopTokens: ReadonlySet<Token>;
  /** Template stop triggers that are plain text (e.g. "\n\n### Human:" in fallback templates). */
  stopTexts: string[];
  /**
   * Present when the reply may begin with a thought section to be split from the answer: the
   * template has one and thinking is not off. `opened`: the prompt already opened it.
   */
  thought?: { markers: ThoughtMarkers; opened: boolean };
  /** The syntax calls are written in, in this prompt's format. */
  calls: CallSyntax;
  /**
   * The generation prompt ends with the call prefix (Functionary v3.2's `>>>`): the reply begins
   * with its recipient, `calls.textRecipient` before text or a function's name for a call.
   */
  recipientFirst?: boolean;
  /** A prompt given as is: its text, as legacy completions' `echo` returns it (the prefix, for infill). */
  givenText?: string;
  /**
   * The prompt followed by the reply's text so far and then `opener` (text that may hold control
   * tokens, such as a call's opening), tokenized together as the prompt is.
   */
  continued(content: string, opener: string): Token[];
}

/** How a model's conversations become prompts: with its own chat template, or node-llama-cpp's wrapper for files without one. */
export interface ConversationPrompts {
  /** `continuing`: the last message is the reply begun (see continuesLastMessage). */
  render(request: ChatRequest, tools: readonly ToolDefinition[], continuing: boolean): RenderedPrompt;
}
