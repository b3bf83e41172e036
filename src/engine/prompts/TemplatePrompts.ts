import { createHash } from "node:crypto";
import type { LlamaModel, Token } from "node-llama-cpp";
import { chatFormatOf, GENERIC_CALLS, type CallSyntax, type ChatFormat } from "../../chatTemplates/chatFormats.js";
import {
  withSystemTools,
  type ChatTemplate,
  type ChatTemplateInput,
  type TemplateMessage,
} from "../../chatTemplates/renderChatTemplate.js";
import { templateCapabilities, type TemplateCapabilities } from "../../chatTemplates/templateCapabilities.js";
import type { ChatMessage, ChatRequest, ToolDefinition } from "../../core/ChatRequest.js";
import { BASE62_ALPHABET } from "../../core/randomBase62.js";
import { ServerError } from "../../core/ServerError.js";
import type { ConversationPrompts, RenderedPrompt } from "./PromptSource.js";

/** One of the file's templates, with what it can show and the family it writes. */
interface TemplateVariant {
  template: ChatTemplate;
  capabilities: TemplateCapabilities;
  format: ChatFormat;
  /** Switches the template reads, passed only to templates that read them (as transformers passes extra kwargs). */
  reads: { thinking: boolean; reasoningEffort: boolean; thinkingBudget: boolean };
}

/**
 * Prompts rendered with the file's own chat template, as Hugging Face's apply_chat_template renders
 * it and llama.cpp's server passes its inputs, and tokenized in one pass with special tokens parsed,
 * as llama.cpp tokenizes them: so the token ids at the joins of template text and message text are
 * the model's own. With tools, the file's `tool_use` template is used where it has one.
 */
export class TemplatePrompts implements ConversationPrompts {
  readonly calls: CallSyntax;
  readonly #model: LlamaModel;
  readonly #chat: TemplateVariant;
  readonly #toolUse: TemplateVariant;
  readonly #tokens: Pick<ChatTemplateInput, "bosToken" | "eosToken">;
  readonly #stopTokens: ReadonlySet<Token>;

  constructor(model: LlamaModel, template: ChatTemplate, toolUse: ChatTemplate | undefined) {
    this.#model = model;
    const { bosString, eosString } = model.tokens;
    // A token the vocabulary lacks stays undefined, as in transformers' special tokens.
    this.#tokens = { ...(bosString !== null ? { bosToken: bosString } : {}), ...(eosString !== null ? { eosToken: eosString } : {}) };
    this.#chat = this.#variant(template);
    this.#toolUse = toolUse ? this.#variant(toolUse) : this.#chat;
    this.calls = this.#toolUse.format.calls ?? GENERIC_CALLS;
    this.#stopTokens = this.#turnEndTokens();
  }

  render(request: ChatRequest, tools: readonly ToolDefinition[], continuing: boolean): RenderedPrompt {
    const rendered = this.renderText(request, tools, continuing);
    const { text } = rendered;
    return { ...rendered, tokens: this.#tokenize(text), continued: (content, opener) => this.#tokenize(text + content + opener) };
  }

  /**
   * The prompt as text, and what goes with it, before tokenizing. `imageMarker`: the text each of
   * the user messages' images stands as, where the message has it (a vision model's projector
   * splits the text there); without one, the images are left out, as a text model's template shows none.
   */
  renderText(
    request: ChatRequest,
    tools: readonly ToolDefinition[],
    continuing: boolean,
    imageMarker?: string,
  ): Omit<RenderedPrompt, "tokens" | "continued"> & { text: string } {
    const variant = tools.length > 0 ? this.#toolUse : this.#chat;
    const { capabilities, reads } = variant;
    const last = request.messages.at(-1);
    // An empty prefill continues nothing: the reply starts its own turn (transformers would keep the closed turn).
    const prefill = continuing && last?.content.trim() ? last.content : undefined;
    const effort = reads.reasoningEffort ? request.reasoningEffort : undefined;
    // An effort asked of a template that reads none but has a switch (DeepSeek R1's as llama.cpp
    // ships it: off unless told) is the request to think: the nearest the template can take.
    const thinking = request.thinking ?? (request.reasoningEffort !== undefined && !reads.reasoningEffort ? true : undefined);
    const messages = this.#messages(request.messages, variant.format.calls?.callIdLength, imageMarker);
    let text = variant.template.render({
      messages: tools.length > 0 && capabilities.systemTools ? withSystemTools(messages, tools) : messages,
      ...(tools.length > 0 ? { tools } : {}),
      addGenerationPrompt: prefill === undefined,
      ...this.#tokens,
      argumentsAs: capabilities.argumentsAs,
      ...(thinking !== undefined ? { enableThinking: thinking } : {}),
      ...(thinking !== undefined && reads.thinking ? { thinking } : {}),
      ...(effort !== undefined ? { reasoningEffort: effort } : {}),
      // Off is a budget of 0 for a template that reads one (Seed-OSS); on leaves its own default (unlimited).
      ...(thinking === false && reads.thinkingBudget ? { thinkingBudget: 0 } : {}),
    });
    let thought: RenderedPrompt["thought"];
    if (prefill !== undefined) {
      text = endAtPrefill(text, prefill);
    } else if (variant.format.thought) {
      const markers = variant.format.thought;
      // Templates that open the thought for the model (DeepSeek R1, QwQ) end their prompt with its marker.
      const opened = text.trimEnd().endsWith(markers.open);
      // Thinking is off where the template turned it off (Qwen3's empty thought). A template that
      // opens the thought whatever it is told cannot: no markup of ours closes it (the prompt stays
      // the template's own). Either way a thought the model writes is split from the answer (gpt-oss
      // always writes one): a reply that does not open one is all answer.
      thought = { markers, opened };
    }
    const { textRecipient, sectionPrefix, prefix } = this.calls;
    const recipientFirst = prefill === undefined && textRecipient !== undefined && text.endsWith(sectionPrefix + prefix);
    return {
      text,
      stopTokens: this.#stopTokens,
      stopTexts: thought?.markers.answerEnd !== undefined ? [thought.markers.answerEnd] : [],
      calls: this.calls,
      ...(recipientFirst ? { recipientFirst } : {}),
      ...(thought ? { thought } : {}),
    };
  }

  /**
   * The conversation as transformers passes it to the template: what the template does not print
   * (tools, past calls or results, in templates without tool support) is not in the prompt, as in
   * the reference rendering; no text of ours is added to it (the tools a template reads from the
   * system message are put there by render).
   */
  #messages(messages: readonly ChatMessage[], idLength: number | undefined, imageMarker: string | undefined): TemplateMessage[] {
    // Tool results carry the name of the function they answer (Hermes, Llama 3.x and others print it).
    const names = new Map<string, string>();
    const idOf = idLength === undefined ? (id: string) => id : (id: string) => callIdOfLength(id, idLength);
    return messages.map((message): TemplateMessage => {
      switch (message.role) {
        case "system":
          return { role: message.role, content: message.content };
        case "user":
          return { role: message.role, content: imageMarker === undefined ? message.content : withMarkers(message, imageMarker) };
        case "assistant": {
          for (const call of message.toolCalls ?? []) names.set(call.id, call.name);
          const toolCalls = message.toolCalls?.map((call) => ({ ...call, id: idOf(call.id) }));
          return {
            role: "assistant",
            content: message.content,
            ...(toolCalls?.length ? { toolCalls } : {}),
            ...(message.reasoning !== undefined ? { reasoningContent: message.reasoning } : {}),
          };
        }
        case "tool": {
          const name = names.get(message.toolCallId);
          return { role: "tool", content: message.content, toolCallId: idOf(message.toolCallId), ...(name !== undefined ? { name } : {}) };
        }
        default:
          return message satisfies never;
      }
    });
  }

  /**
   * Tokenizes a rendered prompt as llama.cpp's server does: special tokens parsed, and the BOS the
   * vocabulary asks for added once (a template that writes it already gets no second one).
   */
  #tokenize(text: string): Token[] {
    const { bos, shouldPrependBosToken } = this.#model.tokens;
    if (!shouldPrependBosToken || bos === null) return this.#model.tokenize(text, true);
    return [bos, ...this.#model.tokenize(withoutAddedBos(this.#model, text), true)];
  }

  #variant(template: ChatTemplate): TemplateVariant {
    return {
      template,
      capabilities: templateCapabilities(template, this.#tokens),
      format: chatFormatOf(template.source),
      reads: {
        // A top-level `thinking` switch (Granite 3.3, DeepSeek V3.1), not a message's `.thinking` or a string.
        thinking: /(?<![\w.'"])thinking(?![\w'"])/.test(template.source),
        reasoningEffort: /\breasoning_effort\b/.test(template.source),
        thinkingBudget: /\bthinking_budget\b/.test(template.source),
      },
    };
  }

  /** The control token the templates end an assistant's turn with (`<|im_end|>`, `<end_of_turn>`), if any. */
  #turnEndTokens(): ReadonlySet<Token> {
    const stops = new Set<Token>();
    for (const variant of new Set([this.#chat, this.#toolUse])) {
      const [first] = this.#model.tokenize(variant.capabilities.turnEnd.trimStart(), true);
      if (first !== undefined && this.#model.isSpecialToken(first)) stops.add(first);
    }
    return stops;
  }
}

/**
 * The rendered text without the BOS the template wrote, where the vocabulary adds one itself (as
 * llama-server's chat handling strips it, common/chat.cpp), so the prompt has one BOS.
 */
export function withoutAddedBos(model: LlamaModel, text: string): string {
  const { bos, bosString, shouldPrependBosToken } = model.tokens;
  if (!shouldPrependBosToken || bos === null || bosString === null) return text;
  return text.startsWith(bosString) ? text.slice(bosString.length) : text;
}

/**
 * A user message's text with `marker` where each of its images stands, as llama-server writes an
 * image part into the text it gives the template (the projector adds the image's own begin and end
 * tokens, so a template's image branch, which would add them again, is not used either).
 */
function withMarkers(message: ChatMessage & { role: "user" }, marker: string): string {
  if (!message.images?.length) return message.content;
  let text = "";
  let from = 0;
  for (const image of [...message.images].sort((a, b) => a.at - b.at)) {
    text += message.content.slice(from, image.at) + marker;
    from = image.at;
  }
  return text + message.content.slice(from);
}

/**
 * A call id as a template that checks ids takes it (Mistral Nemo's: 9 letters and digits): ids of
 * that form as they are, others mapped to one, the same for a call and the result that answers it.
 * Clients keep their own ids (`call_…`, `toolu_…`); only the prompt shows these, as vLLM does for
 * Mistral models.
 */
function callIdOfLength(id: string, length: number): string {
  if (id.length === length && /^[a-zA-Z0-9]+$/.test(id)) return id;
  const digest = createHash("sha256").update(id).digest();
  let out = "";
  for (let i = 0; out.length < length; i++) out += BASE62_ALPHABET[digest[i]! % BASE62_ALPHABET.length];
  return out;
}

/**
 * The rendering cut just after the final message's text, as transformers' continue_final_message
 * cuts it: the reply continues that text, inside its turn.
 */
function endAtPrefill(rendered: string, content: string): string {
  const stripped = content.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at === -1) {
    throw new ServerError("invalid_request", {
      message: "The model's chat template does not show the final assistant message's text as it is, so the reply cannot continue it.",
    });
  }
  // Trailing whitespace the template kept is kept; one it trimmed is not put back.
  const leftTrimmed = content.trimStart();
  const keep = rendered.startsWith(leftTrimmed, at) ? leftTrimmed.length : stripped.length;
  return rendered.slice(0, at + keep);
}
