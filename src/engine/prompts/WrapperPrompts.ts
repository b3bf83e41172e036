import {
  LlamaText,
  SpecialTokensText,
  resolveChatWrapper,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { CallSyntax, ThoughtMarkers } from "../../chatTemplates/chatFormats.js";
import type { ChatRequest, ToolDefinition } from "../../core/ChatRequest.js";
import { toChatHistory } from "../toChatHistory.js";
import { wrapperCallSyntax } from "../tools/ToolCallSyntax.js";
import type { ConversationPrompts, RenderedPrompt } from "./PromptSource.js";

/** A wrapper's thought section. */
interface ThoughtSection {
  /** The opening marker as written into prompts (Qwen3: `<think>\n`); undefined when the generation prompt opens it. */
  prefix: LlamaText | undefined;
  /** The closing marker as written into prompts (Qwen3: `\n</think>`). */
  suffix: LlamaText;
  markers: ThoughtMarkers;
}

/**
 * Prompts for a file without a chat template (or with one @huggingface/jinja cannot parse): one of
 * node-llama-cpp's chat wrappers, as it picks one for the file (its family's, or a general
 * fallback), with its own syntax for calls.
 */
export class WrapperPrompts implements ConversationPrompts {
  readonly calls: CallSyntax;
  readonly #model: LlamaModel;
  readonly #wrapper: ChatWrapper;
  readonly #thought: ThoughtSection | undefined;

  constructor(model: LlamaModel) {
    this.#model = model;
    this.#wrapper = resolveChatWrapper(model, { warningLogs: false });
    this.calls = wrapperCallSyntax(this.#wrapper);
    this.#thought = thoughtSectionOf(this.#wrapper);
  }

  render(request: ChatRequest, tools: readonly ToolDefinition[], continuing: boolean): RenderedPrompt {
    const state = this.#wrapper.generateContextState({
      chatHistory: toChatHistory(request.messages, continuing),
      availableFunctions: tools.length > 0 ? toChatModelFunctions(tools) : undefined,
    });
    const stopTokens = new Set<Token>();
    const stopTexts: string[] = [];
    for (const trigger of state.stopGenerationTriggers) {
      const [first] = trigger.values;
      if (typeof first === "string") {
        // Plain text, such as "\n\n### Human:" in templates of the fallback kind.
        stopTexts.push(trigger.values.map((value) => (typeof value === "string" ? value : "")).join(""));
      } else if (first !== undefined) {
        // A trigger that opens with a control token (`<|im_end|>`, EOS) stops at that token.
        const [token] = trigger.tokenize(this.#model.tokenizer);
        if (token !== undefined) stopTokens.add(token);
      }
    }
    // A continued message is the answer already begun: no thought is opened after it, nor closed.
    const { text, thought } = continuing
      ? { text: state.contextText, thought: undefined }
      : this.#withThought(state.contextText, request.thinking);
    const tokenizer = this.#model.tokenizer;
    return {
      tokens: text.tokenize(tokenizer),
      stopTokens,
      stopTexts,
      calls: this.calls,
      ...(thought ? { thought } : {}),
      continued: (content, opener) => LlamaText([text, content, new SpecialTokensText(opener)]).tokenize(tokenizer),
    };
  }

  /**
   * Where the reply starts, for a wrapper with a thought section. Thinking on (or the default): the
   * reply may open a thought, or is already inside one if the prompt opened it. Thinking off: the
   * prompt ends with an empty, closed thought, the usual way to turn it off (node-llama-cpp renders
   * the reply's position as an assistant message, not with a template's generation prompt where
   * switches are).
   */
  #withThought(prompt: LlamaText, thinking: boolean | undefined): { text: LlamaText; thought?: RenderedPrompt["thought"] } {
    const section = this.#thought;
    if (!section) return { text: prompt };
    const rendered = prompt.toString().trimEnd();
    const { open, close } = section.markers;
    // Wrappers that open the thought for the model end their prompt with the opening marker; one
    // whose marker node-llama-cpp could not read from the prompt (no prefix) always opens it.
    const opened = section.prefix === undefined ? !rendered.endsWith(close) : rendered.endsWith(open);
    if (thinking !== false) return { text: prompt, thought: { markers: section.markers, opened } };
    if (!opened && rendered.endsWith(close)) return { text: prompt };
    const blank = new SpecialTokensText("\n\n");
    return { text: LlamaText([prompt, ...(opened ? [] : [section.prefix ?? ""]), section.suffix, blank]) };
  }
}

/**
 * The thought section of a chat wrapper's settings, if it has a closing marker to split on. The
 * markers are matched without their surrounding whitespace: models vary in the line breaks they
 * write around them.
 */
function thoughtSectionOf(wrapper: ChatWrapper): ThoughtSection | undefined {
  const thought = wrapper.settings.segments?.thought;
  if (!thought?.suffix) return undefined;
  const suffix = LlamaText(thought.suffix);
  const prefix = typeof thought.prefix === "string" || LlamaText.isLlamaText(thought.prefix) ? LlamaText(thought.prefix) : undefined;
  const close = suffix.toString().trim();
  // A wrapper that opens the thought itself: the model's own opening marker is not expected, but
  // the usual pair is recognised should it write one.
  const open = prefix?.toString().trim() ?? KNOWN_OPENERS.get(close) ?? "";
  if (!close || !open) return undefined;
  return { prefix, suffix, markers: { open, close } };
}

/** Opening markers by closing marker, for wrappers whose prompt opens the thought (as node-llama-cpp lists them). */
const KNOWN_OPENERS = new Map([
  ["</think>", "<think>"],
  ["</thought>", "<thought>"],
  ["[/THINK]", "[THINK]"],
  ["<|END_THINKING|>", "<|START_THINKING|>"],
]);

function toChatModelFunctions(tools: readonly ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, ChatModelFunctions[string]> = {};
  for (const tool of tools) {
    functions[tool.name] = { description: tool.description, params: tool.parameters as ChatModelFunctions[string]["params"] };
  }
  return functions;
}
