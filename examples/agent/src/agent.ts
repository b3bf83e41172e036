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
//
// Images a tool returns (view_image's) reach the model after the round's tool messages, in one
// user message of their own: the OpenAI format's tool messages carry text only. Only a model that
// reads images gets them: the service lists "vision" in the model's capabilities (modelhost's
// extension of GET /v1/models/{id}; a service without the field is taken to mean no). For any
// other model the tool's result says the image was not shown, so the model can tell the user.
import { NotFoundError } from "openai";
import type OpenAI from "openai";
import type { Config } from "./config.js";
import type { Match, Retriever } from "./retrieval.js";
import { runTool, type Tool, type ToolImage } from "./tools.js";

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
    "If they do not contain the answer, say so. Use the tools for more searches, the current time, arithmetic, or to look at an image file.",
    "",
    context,
  ].join("\n");
}

/**
 * Runs tool rounds (unstreamed) until a reply asks for none, then streams the answer to `onText`.
 * At most `maxRounds` tool rounds; a model still asking for tools after them gets RoundLimitError.
 * Images the round's tools return follow its tool messages in a user message, if the model reads
 * images; otherwise each such tool's result says they were not shown.
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
    const shown: ShownImages[] = [];
    for (const call of message.tool_calls) {
      const output = await runTool(tools, call, { signal, onSources });
      let result = output.result;
      if (output.images.length > 0) {
        if (await acceptsImages(client, config.chatModel, signal)) {
          shown.push({ tool: call.type === "function" ? call.function.name : call.custom.name, images: output.images });
        } else {
          result = withImagesNotShown(result, config.chatModel);
        }
      }
      messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
    }
    if (shown.length > 0) messages.push(imageMessage(shown));
  }

  const stream = await client.chat.completions.create({ ...base, tool_choice: "none", stream: true }, { signal });
  for await (const chunk of stream) {
    const piece = chunk.choices[0]?.delta?.content;
    if (piece) onText(piece);
  }
}

interface ShownImages {
  tool: string;
  images: readonly ToolImage[];
}

/** The user message after a round's tool messages: each tool's images, introduced by its name. */
function imageMessage(shown: ShownImages[]): OpenAI.ChatCompletionUserMessageParam {
  return {
    role: "user",
    content: shown.flatMap(({ tool, images }): OpenAI.ChatCompletionContentPart[] => [
      { type: "text", text: `The image${images.length === 1 ? "" : "s"} returned by ${tool}:` },
      ...images.map((image) => ({ type: "image_url" as const, image_url: { url: `data:${image.mediaType};base64,${image.data}` } })),
    ]),
  };
}

/** A tool's result with the reason its images did not reach the model, for the model to pass on. */
function withImagesNotShown(result: unknown, model: string): unknown {
  const note = `The chat model (${model}) does not read images, so the image was not shown to it: tell the user it cannot be seen here.`;
  const isObject = typeof result === "object" && result !== null && !Array.isArray(result);
  return isObject ? { ...result, image_not_shown: note } : { result, image_not_shown: note };
}

/**
 * Only answers are cached: a look-up that failed (the answer was cancelled, the service is down)
 * is made again by the next answer that needs it. Keyed by client, which stands for one service.
 */
const visionByClient = new WeakMap<OpenAI, Map<string, boolean>>();

/** Whether the service says `model` reads images, asked once per client and model. */
async function acceptsImages(client: OpenAI, model: string, signal?: AbortSignal): Promise<boolean> {
  let byModel = visionByClient.get(client);
  if (!byModel) visionByClient.set(client, (byModel = new Map()));
  let answer = byModel.get(model);
  if (answer === undefined) {
    answer = await readsImages(client, model, signal);
    byModel.set(model, answer);
  }
  return answer;
}

async function readsImages(client: OpenAI, model: string, signal?: AbortSignal): Promise<boolean> {
  try {
    // `capabilities` is not in the official type; the client passes the field through.
    const { capabilities } = (await client.models.retrieve(model, { signal })) as { capabilities?: unknown };
    return Array.isArray(capabilities) && capabilities.includes("vision");
  } catch (error) {
    // A service that does not list the model one by one says nothing about images: no.
    if (error instanceof NotFoundError) return false;
    throw error;
  }
}
