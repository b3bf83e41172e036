// The agent: retrieval first, then the tool loop, then the streamed answer.
//
// Why the final answer is requested again, streamed: the tool phase is unstreamed (the seed's
// rule: a whole reply is easy to check for `finish_reason: "tool_calls"` and complete call
// arguments), and the answer is streamed to the reader. Whether a reply is the answer is known
// only once it has arrived. So the rounds are unstreamed while the model asks for tools; the
// first reply without tool calls ends the tool phase, and the answer is then requested once more
// with `stream: true` and `tool_choice: "none"` on the same messages (so it cannot turn into a
// call). That costs one extra generation of the answer; the alternative, streaming every round
// and branching on the first delta, saves it but makes the tool phase streamed too, joining call
// fragments by index, which is the part the seed keeps simple.
import type OpenAI from "openai";
import type { Config } from "./config.js";
import type { Match, Retriever } from "./retrieval.js";
import { runTool, type Tool } from "./tools.js";

export const NO_INFORMATION = "I have no information on that in the documents.";

export interface AnswerEvents {
  /** The chunks considered for the question (and for each search the model makes), with scores. */
  onSources(matches: Match[]): void;
  /** One piece of the answer, as it streams. */
  onText(piece: string): void;
}

export class RoundLimitError extends Error {
  constructor(rounds: number) {
    super(`Stopped: the model still asked for tools after ${rounds} rounds (AGENT_MAX_ROUNDS=${rounds}), so there is no answer.`);
    this.name = "RoundLimitError";
  }
}

export interface AgentDeps {
  client: OpenAI;
  config: Pick<Config, "chatModel" | "maxRounds" | "maxTokens">;
  retriever: Retriever;
  tools: Tool[];
}

/** Answers from the documents; when no chunk passes the threshold, says so without asking the chat model. */
export async function answer(question: string, deps: AgentDeps, events: AnswerEvents, signal?: AbortSignal): Promise<void> {
  const matches = await deps.retriever.search(question, signal);
  events.onSources(matches);
  const used = matches.filter((match) => match.used);
  if (used.length === 0) {
    events.onText(NO_INFORMATION);
    return;
  }
  const messages: OpenAI.ChatCompletionMessageParam[] = [
    { role: "system", content: systemPrompt(used) },
    { role: "user", content: question },
  ];
  await runToolLoop(messages, deps, events, signal);
}

function systemPrompt(used: Match[]): string {
  const context = used.map((match, i) => `[${i + 1}] ${match.source}\n${match.text}`).join("\n\n");
  return [
    "Answer the question from the passages below. Cite the passages you use by their number, like [1].",
    "If they do not contain the answer, say so. Use the tools for more searches, the current time, or arithmetic.",
    "",
    context,
  ].join("\n");
}

/**
 * Runs tool rounds (unstreamed) until a reply asks for none, then streams the answer to `onText`.
 * At most `maxRounds` tool rounds; a model still asking for tools after them gets RoundLimitError.
 */
export async function runToolLoop(
  messages: OpenAI.ChatCompletionMessageParam[],
  { client, config, tools }: AgentDeps,
  { onText, onSources }: AnswerEvents,
  signal?: AbortSignal,
): Promise<void> {
  const definitions = tools.map((tool) => tool.definition);
  const limit = config.maxTokens === undefined ? {} : { max_tokens: config.maxTokens };
  const base = { model: config.chatModel, messages, tools: definitions, ...limit };

  for (let round = 1; ; round++) {
    const reply = await client.chat.completions.create({ ...base, tool_choice: "auto" }, { signal });
    const message = reply.choices[0]?.message;
    if (reply.choices[0]?.finish_reason !== "tool_calls" || !message?.tool_calls?.length) break;
    if (round > config.maxRounds) throw new RoundLimitError(config.maxRounds);
    messages.push({ role: "assistant", content: message.content, tool_calls: message.tool_calls });
    for (const call of message.tool_calls) {
      messages.push({ role: "tool", tool_call_id: call.id, content: await runTool(tools, call, { signal, onSources }) });
    }
  }

  const stream = await client.chat.completions.create({ ...base, tool_choice: "none", stream: true }, { signal });
  for await (const chunk of stream) {
    const piece = chunk.choices[0]?.delta?.content;
    if (piece) onText(piece);
  }
}
