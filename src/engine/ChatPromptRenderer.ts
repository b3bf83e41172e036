import {
  JinjaTemplateChatWrapper,
  LlamaGrammar,
  LlamaText,
  SpecialTokensText,
  resolveChatWrapper,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import { ChatTemplate, raisedByTemplate, type TemplateMessage } from "../chatTemplates/renderChatTemplate.js";
import type { ChatMessage, ChatRequest, PromptOverride, ToolDefinition } from "../core/ChatRequest.js";
import { ServerError } from "../core/ServerError.js";
import { checkTokenIds } from "./checkTokenIds.js";
import type { ToolCallPlan } from "./streamCompletion.js";
import type { ThoughtMarkers } from "./ThoughtSplitter.js";
import { continuesLastMessage, toChatHistory } from "./toChatHistory.js";
import { callDelimitersOf, callOpenersOf, toolCallSyntaxOf, type ToolCallSyntax } from "./tools/ToolCallSyntax.js";
import { toolCallGrammar } from "./tools/toolCallGrammar.js";

export interface RenderedPrompt {
  text: LlamaText;
  tokens: Token[];
  /** Control tokens that end the turn in this template (e.g. `<|im_end|>`), besides end-of-generation ones. */
  stopTokens: ReadonlySet<Token>;
  /** Template stop triggers that are plain text (e.g. "\n\n### Human:" in fallback templates). */
  stopTexts: string[];
  /**
   * Present when the reply may begin with a thought section to be split from the answer: the
   * template has one and thinking is not off. `opened`: the prompt already opened it.
   */
  thought?: { markers: ThoughtMarkers; opened: boolean };
  /** A prompt given as is: its text, as legacy completions' `echo` returns it (the prefix, for infill). */
  givenText?: string;
}

/** A template's thought section, as node-llama-cpp's chat wrapper found it (from the Jinja template or the family). */
interface ThoughtSection {
  /** The opening marker as written into prompts (Qwen3: `<think>\n`); undefined when the template's generation prompt opens it. */
  prefix: LlamaText | undefined;
  /** The closing marker as written into prompts (Qwen3: `\n</think>`). */
  suffix: LlamaText;
  markers: ThoughtMarkers;
}

/**
 * Turns conversations into a model's prompt with its own chat template: the template from its GGUF
 * metadata (rendered with Jinja), a known family's wrapper when the template is recognised, or a
 * general fallback when the file has none; and plans tool calls in that template's syntax.
 */
export class ChatPromptRenderer {
  readonly #model: LlamaModel;
  readonly #chatWrapper: ChatWrapper;
  readonly #toolSyntax: ToolCallSyntax;
  readonly #thought: ThoughtSection | undefined;
  /** The file's own Jinja template, where @huggingface/jinja can parse it: the requests it refuses are refused. */
  readonly #template: ChatTemplate | undefined;

  constructor(model: LlamaModel) {
    this.#model = model;
    this.#template = parsedTemplate(model.fileInfo.metadata.tokenizer?.chat_template);
    this.#chatWrapper = resolveChatWrapper(model, { warningLogs: false });
    this.#toolSyntax = toolCallSyntaxOf(this.#chatWrapper);
    this.#thought = thoughtSectionOf(this.#chatWrapper);
  }

  /** Renders the conversation (and the tools the model may call) with its chat template, and tokenizes it. */
  render(request: ChatRequest, tools: readonly ToolDefinition[]): RenderedPrompt {
    if (request.prompt) return this.#renderOverride(request.prompt, request.model);
    const continuing = continuesLastMessage(request.messages, request.continueLastMessage);
    this.#checkTemplateAccepts(request, tools, continuing);
    const state = this.#chatWrapper.generateContextState({
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
    return { text, tokens: text.tokenize(this.#model.tokenizer), stopTokens, stopTexts, ...(thought ? { thought } : {}) };
  }

  /**
   * Refuses what the model's own template refuses, with the template's message (a 400 in the
   * protocol's shape), as transformers and llama-server do: Gemma's "System role not supported",
   * Mistral's "roles must alternate". Only the template's raise_exception counts: where the library
   * fails on a template, the prompt is node-llama-cpp's to render, as before. The extra render
   * costs 0.2–0.35 ms for a 10-turn conversation (ChatML, Qwen3 and gpt-oss templates), until
   * this rendering becomes the prompt itself (issue 31).
   */
  #checkTemplateAccepts(request: ChatRequest, tools: readonly ToolDefinition[], continuing: boolean): void {
    if (!this.#template) return;
    try {
      this.#template.render({
        messages: request.messages.map(toTemplateMessage),
        ...(tools.length > 0 ? { tools } : {}),
        addGenerationPrompt: !continuing,
        bosToken: this.#model.tokens.bosString ?? "",
        eosToken: this.#model.tokens.eosString ?? "",
        ...(request.thinking === false ? { enableThinking: false } : {}),
      });
    } catch (error) {
      if (raisedByTemplate(error)) throw error;
    }
  }

  /**
   * Where the reply starts, for a template with a thought section. Thinking on (or the template's
   * default): the reply may open a thought, or is already inside one if the prompt opened it.
   * Thinking off: the prompt ends with an empty, closed thought, which is how Qwen3's template
   * renders `enable_thinking=false` (`<think>\n\n</think>\n\n`) and the usual way to turn
   * DeepSeek-R1's off. This is done here rather than by the template's own switch because
   * node-llama-cpp renders the reply's position as an assistant message, not with the template's
   * generation prompt where such switches are.
   */
  #withThought(prompt: LlamaText, thinking: boolean | undefined): { text: LlamaText; thought?: RenderedPrompt["thought"] } {
    const section = this.#thought;
    if (!section) return { text: prompt };
    const rendered = prompt.toString().trimEnd();
    const { open, close } = section.markers;
    // Templates that open the thought for the model end their prompt with the opening marker; one
    // whose marker node-llama-cpp could not read from the prompt (no prefix) always opens it.
    const opened = section.prefix === undefined ? !rendered.endsWith(close) : rendered.endsWith(open);
    if (thinking !== false) return { text: prompt, thought: { markers: section.markers, opened } };
    if (!opened && rendered.endsWith(close)) return { text: prompt };
    const blank = new SpecialTokensText("\n\n");
    return { text: LlamaText([prompt, ...(opened ? [] : [section.prefix ?? ""]), section.suffix, blank]) };
  }

  /**
   * A prompt taken as given: raw text (its special tokens read as such), token ids as they are
   * (no BOS added: the caller tokenized), or a fill-in-the-middle prompt in llama.cpp's
   * prefix-suffix-middle order. Generation ends at the model's own end-of-generation tokens only.
   */
  #renderOverride(prompt: PromptOverride, model: string): RenderedPrompt {
    const { tokens: vocabulary } = this.#model;
    const bos = vocabulary.shouldPrependBosToken && vocabulary.bos !== null ? [vocabulary.bos] : [];
    const tokenize = (text: string) => this.#model.tokenize(text, prompt.type === "raw");
    let tokens: Token[];
    let givenText: string;
    switch (prompt.type) {
      case "raw":
        tokens = [...bos, ...tokenize(prompt.text)];
        givenText = prompt.text;
        break;
      case "tokens":
        checkTokenIds(this.#model, prompt.tokens, "prompt");
        tokens = prompt.tokens as Token[];
        givenText = this.#model.detokenize(tokens, true);
        break;
      case "infill": {
        const { prefix, suffix, middle } = vocabulary.infill;
        if (prefix === null || suffix === null || middle === null) {
          throw new ServerError("invalid_request", {
            param: "suffix",
            message: `The model \`${model}\` cannot fill in the middle: its vocabulary has no prefix, suffix and middle tokens.`,
          });
        }
        tokens = [...bos, prefix, ...tokenize(prompt.prefix), suffix, ...tokenize(prompt.suffix), middle];
        givenText = prompt.prefix;
        break;
      }
      default:
        return prompt satisfies never;
    }
    if (tokens.length === 0)
      throw new ServerError("invalid_request", { param: "prompt", message: "Invalid value for 'prompt': the prompt is empty." });
    return { text: LlamaText([]), tokens, stopTokens: new Set(), stopTexts: [], givenText };
  }

  /** How calls to `tools` are generated for this request, in the template's syntax. */
  toolPlan(request: ChatRequest, tools: readonly ToolDefinition[], prompt: LlamaText): ToolCallPlan {
    const syntax = this.#toolSyntax;
    const choice = request.toolChoice;
    const named = choice.type === "function" ? choice.name : undefined;
    const delimiters = callDelimitersOf(syntax);
    const grammar = toolCallGrammar({ tools, delimiters, parallel: request.parallelToolCalls, named });
    const opener = LlamaText([syntax.sectionPrefix, syntax.prefix, ...(named === undefined ? [] : [named, syntax.paramsPrefix])]);
    const tokenizer = this.#model.tokenizer;
    return {
      mode: named !== undefined ? { name: named } : choice.type === "required" ? "required" : "auto",
      openers: callOpenersOf(syntax),
      delimiters,
      grammar: new LlamaGrammar(this.#model.llama, { grammar }),
      openCall(content) {
        return LlamaText([prompt, content, opener]).tokenize(tokenizer);
      },
    };
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
  // A template that opens the thought itself: the model's own opening marker is not expected, but
  // the usual pair is recognised should it write one.
  const open = prefix?.toString().trim() ?? KNOWN_OPENERS.get(close) ?? "";
  if (!close || !open) return undefined;
  return { prefix, suffix, markers: { open, close } };
}

/**
 * Whether a Jinja chat template has a thought section, read as a loaded model's is (for model
 * descriptions, without loading the weights). A template node-llama-cpp cannot render has none.
 */
export function templateThinks(template: string): boolean {
  try {
    return thoughtSectionOf(new JinjaTemplateChatWrapper({ template })) !== undefined;
  } catch {
    return false;
  }
}

/** Opening markers by closing marker, for templates whose prompt opens the thought (as node-llama-cpp lists them). */
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

/** The template, when the file has one the library can parse. */
function parsedTemplate(source: unknown): ChatTemplate | undefined {
  if (typeof source !== "string") return undefined;
  try {
    return new ChatTemplate(source);
  } catch {
    return undefined;
  }
}

function toTemplateMessage(message: ChatMessage): TemplateMessage {
  switch (message.role) {
    case "system":
    case "user":
      return { role: message.role, content: message.content };
    case "assistant":
      return { role: "assistant", content: message.content, ...(message.toolCalls?.length ? { toolCalls: message.toolCalls } : {}) };
    case "tool":
      return { role: "tool", content: message.content, toolCallId: message.toolCallId };
    default:
      return message satisfies never;
  }
}
