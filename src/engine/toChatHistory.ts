import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from "node-llama-cpp";
import type { ChatMessage } from "../core/ChatRequest.js";

/**
 * Maps a conversation to node-llama-cpp's chat history, ending with the model turn to generate.
 *
 * node-llama-cpp keeps a tool result on the function call it answers, inside the model's turn, and
 * the model's next words after the results continue that same turn. So an assistant message with
 * tool calls, the tool messages answering them and the assistant text after them become one model
 * response: `[call₁ (result₁), call₂ (result₂), "text"]`.
 */
export function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  const calls = new Map<string, ChatModelFunctionCall>();
  let openTurn: ChatModelResponse | undefined;

  for (const message of messages) {
    switch (message.role) {
      case "system":
        history.push({ type: "system", text: message.content });
        openTurn = undefined;
        break;
      case "user":
        history.push({ type: "user", text: message.content });
        openTurn = undefined;
        break;
      case "assistant": {
        // An assistant message right after tool results continues the turn that called the tools.
        const continuing = openTurn !== undefined && endsWithAnsweredCall(openTurn);
        const turn: ChatModelResponse = continuing && openTurn ? openTurn : { type: "model", response: [] };
        if (!continuing) history.push(turn);
        if (message.content) turn.response.push(message.content);
        for (const call of message.toolCalls ?? []) {
          const functionCall: ChatModelFunctionCall = {
            type: "functionCall",
            name: call.name,
            params: parseJsonOr(call.arguments),
            result: undefined,
          };
          calls.set(call.id, functionCall);
          turn.response.push(functionCall);
        }
        openTurn = turn;
        break;
      }
      case "tool": {
        const call = calls.get(message.toolCallId);
        if (call) call.result = parseJsonOr(message.content);
        break;
      }
      default:
        return message satisfies never;
    }
  }

  // After tool results the model carries on in the same turn; otherwise it starts a new one.
  const last = history.at(-1);
  if (!(last?.type === "model" && endsWithAnsweredCall(last))) history.push({ type: "model", response: [] });
  return history;
}

function endsWithAnsweredCall(turn: ChatModelResponse): boolean {
  const last = turn.response.at(-1);
  return typeof last === "object" && last.type === "functionCall" && last.result !== undefined;
}

/** Tool arguments and results are JSON by convention; text that is not JSON is passed as is. */
function parseJsonOr(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
