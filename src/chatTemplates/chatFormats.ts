/**
 * How a model family writes tool calls and thoughts, recognised from its chat template's text, as
 * llama.cpp's chat layer (common/chat.cpp) recognises them: each family's template prints past calls
 * in the syntax the model was trained to write, so the markers it contains name the family.
 */

/**
 * The text around calls whose arguments are one JSON object, as the model writes it. For example
 * Qwen and Hermes: `<tool_call>\n{"name": "` NAME `", "arguments": ` ARGS `}\n</tool_call>`, calls
 * separated by "\n". Control tokens appear as their text (`<｜tool▁sep｜>`); the prompt is tokenized
 * with special tokens parsed, so they become the tokens the model reads and writes.
 */
export interface CallSyntax {
  /** Opens the group of calls (often empty). */
  sectionPrefix: string;
  /**
   * Opens one call; the function's name follows. Here and in `paramsPrefix`, `{index}` stands for
   * the call's number and `{id}` for a call id (engine/tools/callPlaceholders.ts).
   */
  prefix: string;
  /** Between the name and the JSON arguments. */
  paramsPrefix: string;
  /** Closes one call. */
  suffix: string;
  /** Between two calls of one reply. */
  betweenCalls: string;
  /** Closes the group of calls. */
  sectionSuffix: string;
  /** Whether the family writes several calls in one reply (Llama 3.x's templates refuse that). */
  parallel: boolean;
  /**
   * Arguments written as one element per parameter instead of one JSON object (Qwen3-Coder's
   * `<parameter=city>\nParis\n</parameter>\n`): the name between `prefix` and `nameEnd`, the value
   * up to `valueEnd`, as text for string parameters and as JSON for others.
   */
  parameters?: ParameterSyntax;
  /**
   * Arguments written as keyword arguments (LFM2's Python `get_weather(city='Paris')`, Gemma 4's
   * `get_weather{city:<|"|>Paris<|"|>}`), read back into JSON.
   */
  keywordArguments?: KeywordSyntax;
  /** Other texts that open a call in free text (gpt-oss also writes ` to=functions.NAME` before its channel). */
  alternates?: readonly string[];
  /**
   * Length of the call ids the family's template checks (Mistral Nemo's: 9 letters and digits,
   * "Tool call IDs should be alphanumeric strings with length 9!"); the protocols mint ids of it.
   */
  callIdLength?: number;
  /**
   * For families that address each message of a reply (Functionary v3.2's `>>>all\n` text,
   * `>>>NAME\n` a call): the text's recipient, written after `prefix`. A generation prompt that
   * ends with the prefix leaves the reply to name its recipient (RenderedPrompt.recipientFirst).
   */
  textRecipient?: string;
}

export interface ParameterSyntax {
  prefix: string;
  nameEnd: string;
  valueEnd: string;
}

/** Keyword arguments: `name` `assign` value, separated by `separator`, up to `end` (which the call's suffix begins with). */
export interface KeywordSyntax {
  assign: string;
  separator: string;
  end: string;
  /** How values are written: as Python literals, or as Gemma 4's (strings between `<|"|>`, dicts' keys bare). */
  literals: "python" | "gemma";
}

/** A thought section's markers, as the template writes them. */
export interface ThoughtMarkers {
  open: string;
  close: string;
  /**
   * Headers the answer may begin with, each left out where present, in order: gpt-oss writes its
   * answer after `<|start|>assistant<|channel|>final<|message|>` (harmony's final channel).
   */
  answerHeaders?: readonly string[];
  /** Text that ends the answer, and the reply (Granite's `</response>`): generation stops there. */
  answerEnd?: string;
}

/** A family's thought markers, recognised by a text of its template (by default, the closing marker). */
interface ThoughtRule extends ThoughtMarkers {
  recognisedBy?: string;
}

export interface ChatFormat {
  /** The family, as llama.cpp's chat layer names its formats. */
  name: string;
  /** Undefined: the template has no call syntax of its own this server writes (the generic one is used). */
  calls?: CallSyntax;
  thought?: ThoughtMarkers;
}

const JSON_CALL = { prefix: '{"name": "', paramsPrefix: '", "arguments": ', suffix: "}" } as const;

/** A family recognised by the markers in its template: the first whose every marker is present, and none of whose exclusions are. */
export interface FamilyRule {
  name: string;
  markers: readonly string[];
  without?: readonly string[];
  calls: CallSyntax;
}

/** LFM2's calls: a Python list of calls with keyword arguments, `[get_weather(city='Paris')]`. */
const LFM2_CALLS: CallSyntax = {
  sectionPrefix: "<|tool_call_start|>[",
  prefix: "",
  paramsPrefix: "(",
  suffix: ")",
  betweenCalls: ", ",
  sectionSuffix: "]<|tool_call_end|>",
  parallel: true,
  keywordArguments: { assign: "=", separator: ", ", end: ")", literals: "python" },
};

/** The families whose calls this server writes and reads, in the order they are recognised. */
export const CALL_FAMILIES: readonly FamilyRule[] = [
  {
    name: "DeepSeek R1",
    // Its arguments in a fenced JSON block, which V3.1's template does not have.
    markers: ["<｜tool▁sep｜>", "```json"],
    calls: {
      sectionPrefix: "<｜tool▁calls▁begin｜>",
      prefix: "<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
      paramsPrefix: "\n```json\n",
      suffix: "\n```<｜tool▁call▁end｜>",
      betweenCalls: "\n",
      sectionSuffix: "<｜tool▁calls▁end｜>",
      parallel: true,
    },
  },
  {
    name: "DeepSeek V3.1",
    markers: ["<｜tool▁call▁begin｜>", "<｜tool▁sep｜>"],
    calls: {
      sectionPrefix: "<｜tool▁calls▁begin｜>",
      prefix: "<｜tool▁call▁begin｜>",
      paramsPrefix: "<｜tool▁sep｜>",
      suffix: "<｜tool▁call▁end｜>",
      betweenCalls: "",
      sectionSuffix: "<｜tool▁calls▁end｜>",
      parallel: true,
    },
  },
  {
    name: "Mistral Small 3.2",
    markers: ["[TOOL_CALLS]", "[CALL_ID]", "[ARGS]"],
    calls: {
      sectionPrefix: "",
      prefix: "[TOOL_CALLS]",
      paramsPrefix: "[CALL_ID]{id}[ARGS]",
      suffix: "",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: true,
      callIdLength: 9,
    },
  },
  {
    name: "Magistral",
    markers: ["[TOOL_CALLS]", "[ARGS]"],
    without: ["[CALL_ID]"],
    calls: {
      sectionPrefix: "",
      prefix: "[TOOL_CALLS]",
      paramsPrefix: "[ARGS]",
      suffix: "",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: true,
    },
  },
  {
    name: "Mistral Nemo",
    markers: ["[TOOL_CALLS]"],
    without: ["[ARGS]"],
    calls: { sectionPrefix: "[TOOL_CALLS][", ...JSON_CALL, betweenCalls: ", ", sectionSuffix: "]", parallel: true, callIdLength: 9 },
  },
  {
    name: "Functionary v3.1 Llama 3.1",
    markers: ["<function=", "<|start_header_id|>"],
    without: ["<parameter="],
    calls: {
      sectionPrefix: "",
      prefix: "<function=",
      paramsPrefix: ">",
      suffix: "</function>",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: true,
    },
  },
  {
    name: "Llama 3.x",
    markers: ["<|start_header_id|>", '"parameters": '],
    calls: {
      sectionPrefix: "",
      prefix: '{"name": "',
      paramsPrefix: '", "parameters": ',
      suffix: "}",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: false,
    },
  },
  {
    name: "Granite",
    markers: ["<|tool_call|>"],
    calls: { sectionPrefix: "<|tool_call|>[", ...JSON_CALL, betweenCalls: ", ", sectionSuffix: "]", parallel: true },
  },
  {
    name: "Nemotron v2",
    markers: ["<TOOLCALL>"],
    calls: { sectionPrefix: "<TOOLCALL>[", ...JSON_CALL, betweenCalls: ", ", sectionSuffix: "]</TOOLCALL>", parallel: true },
  },
  {
    name: "FireFunction v2",
    markers: [" functools["],
    calls: { sectionPrefix: " functools[", ...JSON_CALL, betweenCalls: ", ", sectionSuffix: "]", parallel: true },
  },
  {
    // Phi-4-mini's template lists the tools from the system message (`<|tool|>…<|/tool|>`); its model
    // card's calls are `functools[{"name": …, "arguments": …}]`, as vLLM's phi4_mini_json parser reads them.
    name: "Phi-4-mini",
    markers: ["<|tool|>", "<|/tool|>"],
    calls: { sectionPrefix: "functools[", ...JSON_CALL, betweenCalls: ", ", sectionSuffix: "]", parallel: true },
  },
  {
    name: "Apertus",
    markers: ["<|tools_prefix|>"],
    calls: {
      sectionPrefix: "<|tools_prefix|>[",
      prefix: '{"',
      paramsPrefix: '": ',
      suffix: "}",
      betweenCalls: ", ",
      sectionSuffix: "]<|tools_suffix|>",
      parallel: true,
    },
  },
  {
    name: "MiniMax-M1",
    markers: ["<tool_calls>", "<beginning_of_sentence>"],
    calls: { sectionPrefix: "<tool_calls>\n", ...JSON_CALL, betweenCalls: "\n", sectionSuffix: "\n</tool_calls>", parallel: true },
  },
  {
    name: "Kimi K2",
    markers: ["<|tool_calls_section_begin|>"],
    calls: {
      sectionPrefix: "<|tool_calls_section_begin|>",
      prefix: "<|tool_call_begin|>functions.",
      paramsPrefix: ":{index}<|tool_call_argument_begin|>",
      suffix: "<|tool_call_end|>",
      betweenCalls: "",
      sectionSuffix: "<|tool_calls_section_end|>",
      parallel: true,
    },
  },
  {
    name: "Command R7B",
    markers: ["<|START_ACTION|>"],
    calls: {
      sectionPrefix: "<|START_ACTION|>[\n    ",
      prefix: '{"tool_call_id": "{index}", "tool_name": "',
      paramsPrefix: '", "parameters": ',
      suffix: "}",
      betweenCalls: ",\n    ",
      sectionSuffix: "\n]<|END_ACTION|>",
      parallel: true,
    },
  },
  {
    name: "Functionary v3.2",
    markers: [">>>all"],
    calls: {
      sectionPrefix: "",
      prefix: ">>>",
      paramsPrefix: "\n",
      suffix: "",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: true,
      textRecipient: "all\n",
    },
  },
  // LFM2.5's template writes past calls so; LFM2's lists the tools in <|tool_list_start|> only.
  { name: "LFM2", markers: ["<|tool_call_start|>"], calls: LFM2_CALLS },
  { name: "LFM2", markers: ["<|tool_list_start|>"], calls: LFM2_CALLS },
  {
    name: "Seed-OSS",
    markers: ["<seed:tool_call>"],
    calls: {
      sectionPrefix: "",
      prefix: "<seed:tool_call>\n<function=",
      paramsPrefix: ">\n",
      parameters: { prefix: "<parameter=", nameEnd: ">", valueEnd: "</parameter>\n" },
      suffix: "</function>\n</seed:tool_call>",
      betweenCalls: "\n",
      sectionSuffix: "",
      parallel: true,
    },
  },
  {
    name: "MiniMax-M2",
    markers: ["<minimax:tool_call>"],
    calls: {
      sectionPrefix: "<minimax:tool_call>\n",
      prefix: '<invoke name="',
      paramsPrefix: '">\n',
      parameters: { prefix: '<parameter name="', nameEnd: '">', valueEnd: "</parameter>\n" },
      suffix: "</invoke>\n",
      betweenCalls: "",
      sectionSuffix: "</minimax:tool_call>",
      parallel: true,
    },
  },
  {
    // Also Qwen3.5's, Nemotron 3's and StepFun's: the same XML inside <tool_call>.
    name: "Qwen3-Coder",
    markers: ["<tool_call>", "<function=", "<parameter="],
    calls: {
      sectionPrefix: "",
      prefix: "<tool_call>\n<function=",
      paramsPrefix: ">\n",
      parameters: { prefix: "<parameter=", nameEnd: ">\n", valueEnd: "\n</parameter>\n" },
      suffix: "</function>\n</tool_call>",
      betweenCalls: "\n",
      sectionSuffix: "",
      parallel: true,
    },
  },
  {
    name: "GLM 4.5",
    markers: ["<tool_call>", "<arg_key>"],
    calls: {
      sectionPrefix: "",
      prefix: "<tool_call>",
      paramsPrefix: "\n",
      parameters: { prefix: "<arg_key>", nameEnd: "</arg_key>\n<arg_value>", valueEnd: "</arg_value>\n" },
      suffix: "</tool_call>",
      betweenCalls: "\n",
      sectionSuffix: "",
      parallel: true,
    },
  },
  {
    // `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>`, as llama.cpp's
    // common/parsers/gemma4.cpp reads it; several calls follow one another.
    name: "Gemma 4",
    markers: ["'<|tool_call>call:'"],
    calls: {
      sectionPrefix: "",
      prefix: "<|tool_call>call:",
      paramsPrefix: "{",
      suffix: "}<tool_call|>",
      betweenCalls: "",
      sectionSuffix: "",
      parallel: true,
      keywordArguments: { assign: ":", separator: ",", end: "}", literals: "gemma" },
    },
  },
  {
    name: "Hermes 2 Pro",
    markers: ["<tool_call>"],
    // Families that put other syntaxes inside <tool_call> (Qwen3-Coder's and GLM's XML arguments).
    without: ["<function=", "<arg_key>", "<parameter="],
    calls: {
      sectionPrefix: "",
      prefix: '<tool_call>\n{"name": "',
      paramsPrefix: '", "arguments": ',
      suffix: "}\n</tool_call>",
      betweenCalls: "\n",
      sectionSuffix: "",
      parallel: true,
    },
  },
];

/**
 * The syntax for templates without a call syntax of their own, as llama.cpp's generic format: a JSON
 * object naming the call. A template that shows no tools gets no text of ours about them: the
 * grammar writes these calls where they are asked for (`required`, a named function).
 */
export const GENERIC_CALLS: CallSyntax = {
  sectionPrefix: "",
  prefix: '{"tool_call": {"name": "',
  paramsPrefix: '", "arguments": ',
  suffix: "}}",
  betweenCalls: "\n",
  sectionSuffix: "",
  parallel: true,
  // A model that writes `{"tool_call":` is opening a call, whatever spacing it would put in the rest
  // of the prefix (`{"name":"…`); the rewind then writes the exact prefix and the grammar takes over.
  alternates: ['{"tool_call":'],
};

/**
 * gpt-oss's harmony format: the reply is a series of messages on channels, the thought on
 * `analysis`, the answer on `final`, calls on `commentary` addressed to the function.
 */
const HARMONY: ChatFormat = {
  name: "gpt-oss",
  calls: {
    sectionPrefix: "",
    prefix: "<|channel|>commentary to=functions.",
    paramsPrefix: " <|constrain|>json<|message|>",
    // `<|call|>` ends the turn: it is an end-of-generation token, so the call ends with its arguments.
    suffix: "",
    betweenCalls: "",
    sectionSuffix: "",
    parallel: false,
    alternates: [" to=functions."],
  },
  thought: {
    open: "<|channel|>analysis<|message|>",
    close: "<|end|>",
    answerHeaders: ["<|start|>assistant", "<|channel|>final<|message|>"],
  },
};

/** Thought markers, checked in order (Seed's before the bare `<think>` it contains). */
const THOUGHTS: readonly ThoughtRule[] = [
  { open: "<seed:think>", close: "</seed:think>" },
  // Granite 3.3, told to think, writes `<think>…</think><response>…</response>`.
  {
    open: "<think>",
    close: "</think>",
    answerHeaders: ["<response>"],
    answerEnd: "</response>",
    recognisedBy: "<response></response>",
  },
  { open: "<think>", close: "</think>" },
  { open: "[THINK]", close: "[/THINK]" },
  // Command R7B writes its answer between <|START_RESPONSE|> and <|END_RESPONSE|>, which ends the reply.
  { open: "<|START_THINKING|>", close: "<|END_THINKING|>", answerHeaders: ["<|START_RESPONSE|>"], answerEnd: "<|END_RESPONSE|>" },
  // Gemma 4's thought channel, `<|channel>thought\n…<channel|>` (llama.cpp's common/parsers/gemma4.cpp
  // takes the same start and end tags); thinking off, its prompt ends with that channel empty.
  { open: "<|channel>thought", close: "<channel|>" },
  // Apertus's deliberation, `<|inner_prefix|>…<|inner_suffix|>` (its template's `thoughts` blocks).
  { open: "<|inner_prefix|>", close: "<|inner_suffix|>" },
];

/** The family of a chat template, from the markers in its text. */
export function chatFormatOf(source: string): ChatFormat {
  if (source.includes("<|channel|>") && source.includes("<|message|>")) return HARMONY;
  const family = CALL_FAMILIES.find(
    (rule) => rule.markers.every((m) => source.includes(m)) && !rule.without?.some((m) => source.includes(m)),
  );
  const rule = THOUGHTS.find((each) => source.includes(each.recognisedBy ?? each.close));
  const thought = rule && {
    open: rule.open,
    close: rule.close,
    ...(rule.answerHeaders ? { answerHeaders: rule.answerHeaders } : {}),
    ...(rule.answerEnd ? { answerEnd: rule.answerEnd } : {}),
  };
  return {
    name: family?.name ?? "generic",
    ...(family ? { calls: family.calls } : {}),
    ...(thought ? { thought } : {}),
  };
}
