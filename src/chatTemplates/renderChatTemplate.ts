import { Environment, Template } from "@huggingface/jinja";
import type { ToolCall, ToolDefinition } from "../core/ChatRequest.js";
import { ServerError } from "../core/ServerError.js";
import { Jinja2Interpreter } from "./jinja2Interpreter.js";
import { strftime } from "./strftime.js";

/** A turn as a chat template reads it: core's message plus the fields some templates print. */
export interface TemplateMessage {
  role: string;
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
  /** The function a tool result answers (Hermes, Llama 3.x and others print it). */
  name?: string;
  /** A thought kept in history (Qwen3, DeepSeek, gpt-oss's analysis channel print it). */
  reasoningContent?: string;
  /** A system message's tools as JSON text: Phi-4-mini's template prints them there, not from `tools`. */
  tools?: string;
}

export interface ChatTemplateInput {
  messages: TemplateMessage[];
  /** None (rendered as Python's None, as transformers passes it) when the request has no tools. */
  tools?: readonly ToolDefinition[];
  addGenerationPrompt: boolean;
  /** The tokenizer's tokens; a token the vocabulary lacks stays undefined, as in transformers' special_tokens_map. */
  bosToken?: string;
  eosToken?: string;
  /** Passed only when set, like transformers' extra kwargs: a template tests `enable_thinking is defined`. */
  enableThinking?: boolean;
  /** The `thinking` switch of templates that read one by that name (Granite 3.3, DeepSeek V3.1). */
  thinking?: boolean;
  reasoningEffort?: "low" | "medium" | "high";
  /** Seed-OSS's `thinking_budget` in tokens: 0 turns its thinking off (its generation prompt closes the thought). */
  thinkingBudget?: number;
  /**
   * Tool-call arguments as objects (transformers' documented form, which templates that `tojson` them
   * need) or as the JSON text the model wrote (templates that print `{{ arguments }}` as is need that).
   */
  argumentsAs?: "object" | "string";
  /** The instant strftime_now prints (default: now), in UTC so that a fixed instant renders alike everywhere. */
  now?: Date;
}

/** Thrown by the template's own raise_exception: its message is the template author's, for the client. */
class TemplateRaised extends Error {}

/**
 * A model's own Jinja chat template, rendered as Hugging Face's apply_chat_template renders it
 * (transformers' utils/chat_template_utils.py): @huggingface/jinja already lexes with trim_blocks and
 * lstrip_blocks and its tojson takes transformers' arguments (ensure_ascii=False, indent, separators,
 * sort_keys=False); this adds transformers' inputs (tools as {type: "function", function}, documents
 * None), raise_exception as a client error, and a strftime_now whose clock the caller may fix.
 */
export class ChatTemplate {
  readonly #template: Template;
  /**
   * The key a message's past thought goes under: `thinking` for a template that reads that and not
   * `reasoning_content` (gpt-oss's), as llama.cpp's server passes it; else `reasoning_content`.
   */
  readonly #thoughtKey: string;

  /** Parses once; a template the library cannot parse throws here, with the library's reason. */
  constructor(readonly source: string) {
    this.#template = new Template(source);
    this.#thoughtKey =
      /message\.thinking\b|message\[['"]thinking['"]\]/.test(source) && !source.includes("reasoning_content")
        ? "thinking"
        : "reasoning_content";
  }

  render(input: ChatTemplateInput): string {
    const now = input.now ?? new Date();
    const tools = input.tools?.map((tool) => ({ type: "function", function: toolFunction(tool) }));
    const context: Record<string, unknown> = {
      messages: input.messages.map((message) => toTemplateMessage(message, input.argumentsAs ?? "object", this.#thoughtKey)),
      // transformers passes None rather than leaving these out, so `tools is defined` holds and `tools is none` decides.
      tools: tools ?? null,
      documents: null,
      add_generation_prompt: input.addGenerationPrompt,
      raise_exception: (message: unknown) => {
        throw new TemplateRaised(String(message));
      },
      strftime_now: (format: unknown) => strftime(now, String(format)),
    };
    if (input.bosToken !== undefined) context.bos_token = input.bosToken;
    if (input.eosToken !== undefined) context.eos_token = input.eosToken;
    if (input.enableThinking !== undefined) context.enable_thinking = input.enableThinking;
    if (input.thinking !== undefined) context.thinking = input.thinking;
    if (input.reasoningEffort !== undefined) context.reasoning_effort = input.reasoningEffort;
    if (input.thinkingBudget !== undefined) context.thinking_budget = input.thinkingBudget;
    // Template.render() would declare the library's own raise_exception and strftime_now, and a second
    // declaration of a name throws, so the environment is built here: the library's globals, then ours.
    const env = new Environment();
    for (const [name, value] of Object.entries({ ...libraryGlobals, ...context })) env.set(name, value);
    try {
      return new Jinja2Interpreter(env, serverVariables(tools, now)).render(this.#template.parsed);
    } catch (error) {
      if (error instanceof TemplateRaised) throw new ServerError("invalid_request", { message: error.message, cause: error });
      // The template failed on these inputs (an undefined variable, a type error in its own code): the request
      // is what the template cannot render, so it is the client's to change, as with raise_exception.
      const reason = error instanceof Error ? error.message : String(error);
      throw new ServerError("invalid_request", {
        message: `The model's chat template failed to render this request: ${reason}`,
        cause: error,
      });
    }
  }
}

/**
 * Variables llama.cpp's server gives the templates that read them and do not define them, beyond
 * transformers' inputs (its FireFunction v2 handler, common_chat_params_init_firefunction_v2, whose
 * template prints both and fails without them): `functions`, the request's tools as JSON indented by
 * 2 (nlohmann's dump(2), which JSON.stringify matches), "" without tools; `datetime`, the instant as
 * "Jul 15 2025 09:30:00 GMT". A template that reads neither never sees them.
 */
function serverVariables(tools: readonly object[] | undefined, now: Date): Record<string, () => unknown> {
  return {
    functions: () => (tools === undefined ? "" : JSON.stringify(tools, null, 2)),
    datetime: () => strftime(now, "%b %d %Y %H:%M:%S GMT"),
  };
}

/** What @huggingface/jinja 0.5.11's setupGlobals declares, less the two replaced above. */
const libraryGlobals: Record<string, unknown> = {
  false: false,
  true: true,
  none: null,
  False: false,
  True: true,
  None: null,
  range: (...args: number[]): number[] => {
    const [start, stop, step = 1] = args.length === 1 ? [0, args[0]!] : args;
    if (step === 0) throw new Error("range() arg 3 must not be zero");
    const out: number[] = [];
    for (let i = start!; step > 0 ? i < stop! : i > stop!; i += step) out.push(i);
    return out;
  },
};

const TOJSON = new Template("{{ value | tojson }}");

/**
 * The functions offered, as JSON text written by the templates' own `tojson` (transformers' json.dumps
 * with ", " and ": "): for templates that read them from a system message's `tools` (Phi-4-mini's).
 */
export function toolsAsJson(tools: readonly ToolDefinition[]): string {
  return TOJSON.render({ value: tools.map(toolFunction) });
}

/**
 * The conversation with the tools offered in its system message's `tools` field, where a template
 * like Phi-4-mini's shows them (its model card's form); one with empty text if it has no system message.
 */
export function withSystemTools(messages: TemplateMessage[], tools: readonly ToolDefinition[]): TemplateMessage[] {
  const text = toolsAsJson(tools);
  const [first, ...rest] = messages;
  return first?.role === "system" ? [{ ...first, tools: text }, ...rest] : [{ role: "system", content: "", tools: text }, ...messages];
}

function toolFunction(tool: ToolDefinition): Record<string, unknown> {
  return tool.description === undefined
    ? { name: tool.name, parameters: tool.parameters }
    : { name: tool.name, description: tool.description, parameters: tool.parameters };
}

/** transformers' message dict; keys absent in the message stay absent (undefined), as in a Python dict. */
function toTemplateMessage(message: TemplateMessage, argumentsAs: "object" | "string", thoughtKey: string): Record<string, unknown> {
  const out: Record<string, unknown> = { role: message.role, content: message.content };
  if (message.toolCalls !== undefined) {
    out.tool_calls = message.toolCalls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: argumentsAs === "object" ? parseArguments(call.arguments) : call.arguments },
    }));
  }
  if (message.toolCallId !== undefined) out.tool_call_id = message.toolCallId;
  if (message.name !== undefined) out.name = message.name;
  if (message.reasoningContent !== undefined) out[thoughtKey] = message.reasoningContent;
  if (message.tools !== undefined) out.tools = message.tools;
  return out;
}

/** Arguments the model wrote that are not JSON stay text: a template that tojson's them shows what was written. */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
