import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelResponse } from "node-llama-cpp";
import type { ChatMessage } from "../core/ChatRequest.js";

/**
 * Whether the reply continues the conversation's last message (ChatRequest.continueLastMessage):
 * asked for, and that message is an assistant's without tool calls.
 */
export function continuesLastMessage(messages: readonly ChatMessage[], asked: boolean | undefined): boolean {
  const last = messages.at(-1);
  return asked === true && last?.role === "assistant" && (last.toolCalls ?? []).length === 0;
}

/**
 * Maps a conversation to node-llama-cpp's chat history, ending with the model turn to generate.
 *
 * node-llama-cpp keeps a tool result on the function call it answers, inside the model's turn, and
 * the model's next words after the results continue that same turn. So an assistant message with
 * tool calls, the tool messages answering them and the assistant text after them become one model
 * response: `[call₁ (result₁), call₂ (result₂), "text"]`.
 *
 * Chat wrappers render the history's last model turn open (no end-of-turn after it): that is where
 * the model writes. `continueLast` (see continuesLastMessage) makes the last assistant message
 * that turn, so the model continues its text instead of starting a turn of its own.
 */
export function toChatHistory(messages: readonly ChatMessage[], continueLast = false): ChatHistoryItem[] {
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

  // After tool results, or continuing the last message, the model carries on in the same turn;
  // otherwise it starts a new one.
  const last = history.at(-1);
  const carriesOn = last?.type === "model" && (endsWithAnsweredCall(last) || continuesLastMessage(messages, continueLast));
  if (!carriesOn) history.push({ type: "model", response: [] });
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
