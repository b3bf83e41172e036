import { ChatTemplate, toolsAsJson, type ChatTemplateInput, type TemplateMessage } from "./renderChatTemplate.js";

/**
 * What a chat template can show, found by rendering small conversations with it and looking for
 * what was put in (as minja, llama.cpp's template engine, finds a template's capabilities): a
 * template that ignores tools does not print them.
 */
export interface TemplateCapabilities {
  /** Prints the tools offered. */
  tools: boolean;
  /**
   * Prints the tools only from a system message's `tools` field, as JSON text (Phi-4-mini's
   * template, whose model card puts them there): the tools offered go to the system message.
   */
  systemTools: boolean;
  /**
   * Past calls' arguments as the template needs them: an object (transformers' form, which templates
   * that `tojson` them need) or the JSON text (templates that print `{{ arguments }}` as they are).
   */
  argumentsAs: "object" | "string";
  /** What the template writes after an assistant's message: its end of turn (`<|im_end|>\n`), maybe empty. */
  turnEnd: string;
}

const NEEDLE = {
  tool: "capability_probe_tool",
  call: "capability_probe_call",
  reply: "capability_probe_reply",
};

/**
 * What a model's templates can show, for a model's description: whether the template (or its
 * tool_use variant) prints tools. A template the library cannot parse shows none. The file's bos and
 * eos are not read here: empty ones stand in, since templates that join them to text (Functionary
 * v3.1's, FireFunction's `bos_token + …`) fail without them, as jinja2 does, whatever they print.
 */
export function templatePrintsTools(sources: readonly string[]): boolean {
  return sources.some((source) => {
    try {
      const capabilities = templateCapabilities(new ChatTemplate(source), { bosToken: "", eosToken: "" });
      return capabilities.tools || capabilities.systemTools;
    } catch {
      return false;
    }
  });
}

export function templateCapabilities(
  template: ChatTemplate,
  tokens: Pick<ChatTemplateInput, "bosToken" | "eosToken">,
): TemplateCapabilities {
  const render = (messages: TemplateMessage[], extra: Partial<ChatTemplateInput> = {}): string => {
    try {
      return template.render({ messages, addGenerationPrompt: false, ...tokens, now: new Date(0), ...extra });
    } catch {
      return "";
    }
  };
  const user: TemplateMessage = { role: "user", content: "Hello" };
  const call = { id: "call00001", name: NEEDLE.call, arguments: JSON.stringify({ city: "Paris" }) };
  const calling: TemplateMessage = { role: "assistant", content: "", toolCalls: [call] };
  // Objects, transformers' documented form, unless the template fails on them (adding a dict to a
  // string) where it renders the JSON text: then it prints arguments as they are.
  const asObject = render([user, calling]);
  const asString = render([user, calling], { argumentsAs: "string" });
  const argumentsAs = !asObject.includes(NEEDLE.call) && asString.includes(NEEDLE.call) ? "string" : "object";
  const tool = { name: NEEDLE.tool, description: "A probe", parameters: { type: "object", properties: {} } };
  const replied = render([user, { role: "assistant", content: NEEDLE.reply }]);
  const afterReply = replied.indexOf(NEEDLE.reply);
  const tools = render([user], { tools: [tool] }).includes(NEEDLE.tool);
  return {
    tools,
    systemTools: !tools && render([{ role: "system", content: "", tools: toolsAsJson([tool]) }, user]).includes(NEEDLE.tool),
    argumentsAs,
    turnEnd: afterReply === -1 ? "" : replied.slice(afterReply + NEEDLE.reply.length),
  };
}
