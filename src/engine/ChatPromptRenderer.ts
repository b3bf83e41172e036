import { LlamaGrammar, type LlamaModel, type Token } from "node-llama-cpp";
import { GENERIC_CALLS } from "../chatTemplates/chatFormats.js";
import { ChatTemplate } from "../chatTemplates/renderChatTemplate.js";
import type { ChatRequest, PromptOverride, ToolDefinition } from "../core/ChatRequest.js";
import { ServerError } from "../core/ServerError.js";
import { checkTokenIds } from "./checkTokenIds.js";
import type { RenderedPrompt } from "./prompts/PromptSource.js";
import { TemplatePrompts, withoutAddedBos } from "./prompts/TemplatePrompts.js";
import type { NativeContext } from "./llamaInternals.js";
import type { VisionProjector } from "./VisionProjector.js";
import type { ImageInput } from "../core/images.js";
import { WrapperPrompts } from "./prompts/WrapperPrompts.js";
import type { ToolCallPlan } from "./streamCompletion.js";
import { continuesLastMessage } from "./toChatHistory.js";
import { callDelimitersOf, callOpenersOf } from "./tools/ToolCallSyntax.js";
import { toolCallGrammar } from "./tools/toolCallGrammar.js";
import { firstCallText } from "./tools/callPlaceholders.js";

export type { RenderedPrompt } from "./prompts/PromptSource.js";

/**
 * Turns conversations into a model's prompt with its own chat template (TemplatePrompts), or, only
 * for a file without one @huggingface/jinja can parse, with node-llama-cpp's wrapper for it
 * (WrapperPrompts); and plans tool calls in the syntax the prompt uses.
 */
export class ChatPromptRenderer {
  readonly #model: LlamaModel;
  readonly #template: TemplatePrompts | undefined;
  #wrapper: WrapperPrompts | undefined;

  constructor(model: LlamaModel) {
    this.#model = model;
    const tokenizer = model.fileInfo.metadata.tokenizer as Record<string, unknown> | undefined;
    const template = parsedTemplate(tokenizer?.chat_template);
    this.#template = template ? new TemplatePrompts(model, template, parsedTemplate(tokenizer?.["chat_template.tool_use"])) : undefined;
  }

  /** Renders the conversation (and the tools the model may call) with its chat template, and tokenizes it. */
  render(request: ChatRequest, tools: readonly ToolDefinition[]): RenderedPrompt {
    if (request.prompt) return this.#renderOverride(request.prompt, request.model);
    const continuing = continuesLastMessage(request.messages, request.continueLastMessage);
    if (!this.#template) return this.#wrapperPrompts().render(request, tools, continuing);
    // A template that fails on the request (its own raise_exception, Gemma's "System role not supported",
    // or an error in its code where jinja2 fails too: Command R+'s tool_use without tools) is the
    // client's error, in the protocol's shape: no other format stands in for the model's own.
    return this.#template.render(request, tools, continuing);
  }

  /**
   * Renders a conversation whose user messages show images, for a vision model: the template renders
   * the projector's marker where each image is, and the projector tokenizes the text around them
   * and prepares each image (evaluated later into a sequence of `context`).
   */
  async renderWithImages(
    request: ChatRequest,
    tools: readonly ToolDefinition[],
    projector: VisionProjector,
    context: NativeContext,
  ): Promise<RenderedPrompt> {
    const images = request.messages.flatMap((message) =>
      message.role === "user" ? [...(message.images ?? [])].sort((a, b) => a.at - b.at) : [],
    );
    if (!this.#template) {
      throw new ServerError("invalid_request", {
        param: images[0]?.param ?? "messages",
        message: `The model \`${request.model}\` has no chat template (or none this server can read) to place images in.`,
      });
    }
    const continuing = continuesLastMessage(request.messages, request.continueLastMessage);
    const rendered = this.#template.renderText(request, tools, continuing, projector.marker);
    const shown = rendered.text.split(projector.marker).length - 1;
    if (shown !== images.length) {
      throw new ServerError("invalid_request", {
        param: images[0]?.param ?? "messages",
        message: `The model's chat template shows ${shown} of the request's ${images.length} images: it leaves out a message that holds one.`,
      });
    }
    const inputs = images.map(({ source }): ImageInput => {
      if (source.type !== "checked") throw new Error("An image reached the engine unchecked (see http/imageInput.ts).");
      return source.image;
    });
    const split = await projector.tokenize(
      withoutAddedBos(this.#model, rendered.text),
      inputs,
      images.map((image) => image.param),
      context,
    );
    if (split.tokens.at(-1)! < 0) {
      throw new ServerError("invalid_request", {
        param: images.at(-1)!.param,
        message:
          "The prompt ends with an image: the model's template writes nothing after it for the model to answer from. Add text after the image.",
      });
    }
    return {
      ...rendered,
      // Shown (POST /apply-template) with mtmd's usual marker: the random one is the server's own.
      text: rendered.text.replaceAll(projector.marker, MEDIA_MARKER_SHOWN),
      tokens: split.tokens,
      images: split.images,
      continued: (content, opener) => split.continued(content + opener),
    };
  }

  #wrapperPrompts(): WrapperPrompts {
    return (this.#wrapper ??= new WrapperPrompts(this.#model));
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
    const continued = (content: string, opener: string) => [...tokens, ...this.#model.tokenize(content + opener, true)];
    return { tokens, stopTokens: new Set(), stopTexts: [], calls: GENERIC_CALLS, givenText, continued };
  }

  /** How calls to `tools` are generated for this request, in the template's syntax. */
  toolPlan(request: ChatRequest, tools: readonly ToolDefinition[], prompt: RenderedPrompt): ToolCallPlan {
    const syntax = prompt.calls;
    const choice = request.toolChoice;
    const named = choice.type === "function" ? choice.name : undefined;
    const delimiters = callDelimitersOf(syntax, tools);
    const parallel = request.parallelToolCalls && syntax.parallel;
    const grammar = toolCallGrammar({ tools, delimiters, parallel, named });
    // The first call's opening, its index (Kimi K2's, Command R7B's) 0, its id (Mistral Small 3.2's) a new one;
    // where the prompt ends with the prefix (Functionary v3.2's `>>>`), only what follows it.
    const opening = prompt.recipientFirst ? "" : syntax.sectionPrefix + syntax.prefix;
    const opener = firstCallText(opening + (named === undefined ? "" : named + syntax.paramsPrefix));
    return {
      mode: named !== undefined ? { name: named } : choice.type === "required" ? "required" : "auto",
      openers: callOpenersOf(syntax),
      // A reply that names its recipient first opens a call with the function's name.
      startOpeners: prompt.recipientFirst ? tools.map((tool) => tool.name + syntax.paramsPrefix) : [],
      delimiters,
      grammar: new LlamaGrammar(this.#model.llama, { grammar }),
      openCall: (content) => prompt.continued(content, opener),
    };
  }
}

/** How an image shows in a rendered prompt given back to clients: mtmd's default marker. */
const MEDIA_MARKER_SHOWN = "<__media__>";

/** The template, when the file has one the library can parse. */
function parsedTemplate(source: unknown): ChatTemplate | undefined {
  if (typeof source !== "string") return undefined;
  try {
    return new ChatTemplate(source);
  } catch {
    return undefined;
  }
}
