import {
  LlamaGrammar,
  LlamaText,
  resolveChatWrapper,
  type ChatModelFunctions,
  type ChatWrapper,
  type LlamaModel,
  type Token,
} from "node-llama-cpp";
import type { ChatRequest, PromptOverride, ToolDefinition } from "../core/ChatRequest.js";
import { ServerError } from "../core/ServerError.js";
import type { ToolCallPlan } from "./streamCompletion.js";
import { toChatHistory } from "./toChatHistory.js";
import { callDelimitersOf, callOpenersOf, toolCallSyntaxOf, type ToolCallSyntax } from "./tools/ToolCallSyntax.js";
import { toolCallGrammar } from "./tools/toolCallGrammar.js";

export interface RenderedPrompt {
  text: LlamaText;
  tokens: Token[];
  /** Control tokens that end the turn in this template (e.g. `<|im_end|>`), besides end-of-generation ones. */
  stopTokens: ReadonlySet<Token>;
  /** Template stop triggers that are plain text (e.g. "\n\n### Human:" in fallback templates). */
  stopTexts: string[];
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

  constructor(model: LlamaModel) {
    this.#model = model;
    this.#chatWrapper = resolveChatWrapper(model, { warningLogs: false });
    this.#toolSyntax = toolCallSyntaxOf(this.#chatWrapper);
  }

  /** Renders the conversation (and the tools the model may call) with its chat template, and tokenizes it. */
  render(request: ChatRequest, tools: readonly ToolDefinition[]): RenderedPrompt {
    if (request.prompt) return this.#renderOverride(request.prompt, request.model);
    const state = this.#chatWrapper.generateContextState({
      chatHistory: toChatHistory(request.messages),
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
    return { text: state.contextText, tokens: state.contextText.tokenize(this.#model.tokenizer), stopTokens, stopTexts };
  }

  /**
   * A prompt taken as given: raw text (its special tokens read as such), or a fill-in-the-middle
   * prompt in llama.cpp's prefix-suffix-middle order. Generation ends at the model's own
   * end-of-generation tokens only.
   */
  #renderOverride(prompt: PromptOverride, model: string): RenderedPrompt {
    const { tokens: vocabulary } = this.#model;
    const bos = vocabulary.shouldPrependBosToken && vocabulary.bos !== null ? [vocabulary.bos] : [];
    const tokenize = (text: string) => this.#model.tokenize(text, prompt.type === "raw");
    let tokens: Token[];
    switch (prompt.type) {
      case "raw":
        tokens = [...bos, ...tokenize(prompt.text)];
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
        break;
      }
      default:
        return prompt satisfies never;
    }
    return { text: LlamaText([]), tokens, stopTokens: new Set(), stopTexts: [] };
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
        const before = LlamaText([prompt, content]).tokenize(tokenizer);
        const tokens = LlamaText([prompt, content, opener]).tokenize(tokenizer);
        return { tokens, openerTokens: tokens.length - before.length };
      },
    };
  }
}

function toChatModelFunctions(tools: readonly ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, ChatModelFunctions[string]> = {};
  for (const tool of tools) {
    functions[tool.name] = { description: tool.description, params: tool.parameters as ChatModelFunctions[string]["params"] };
  }
  return functions;
}
