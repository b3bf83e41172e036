import type { ChatEvent } from "../../core/ChatEvent.js";
import { endedWithoutResult } from "../StreamTranslator.js";
import { MessageStream, type MessageIdentity } from "./MessageStream.js";
import type { Message, MessageStreamEvent, ResponseContentBlock } from "./schemas.js";

/**
 * The whole reply of a non-streamed request: the stream's events applied in order, as the SDK
 * accumulates a streamed one, so both forms always agree.
 */
export async function toMessage(identity: MessageIdentity, events: AsyncIterable<ChatEvent>, promptTokens: number): Promise<Message> {
  const stream = new MessageStream(identity, promptTokens);
  const { message } = stream.messageStart();
  const json = new Map<number, string>();
  let finished = false;
  for await (const event of events) {
    for (const streamed of stream.next(event)) {
      switch (streamed.type) {
        case "content_block_start":
          message.content[streamed.index] = streamed.content_block;
          break;
        case "content_block_delta":
          applyDelta(message.content[streamed.index], streamed.delta, json, streamed.index);
          break;
        case "content_block_stop": {
          const block = message.content[streamed.index];
          if (block?.type === "tool_use") block.input = parseInput(json.get(streamed.index) ?? "");
          break;
        }
        case "message_delta":
          message.stop_reason = streamed.delta.stop_reason;
          message.stop_sequence = streamed.delta.stop_sequence;
          message.usage = { ...message.usage, ...streamed.usage };
          break;
        case "message_stop":
          finished = true;
          break;
        case "message_start":
        case "ping":
          break;
        default:
          return streamed satisfies never;
      }
    }
  }
  if (!finished) throw endedWithoutResult();
  return message;
}

function applyDelta(
  block: ResponseContentBlock | undefined,
  delta: Extract<MessageStreamEvent, { type: "content_block_delta" }>["delta"],
  json: Map<number, string>,
  index: number,
): void {
  if (delta.type === "text_delta" && block?.type === "text") block.text += delta.text;
  else if (delta.type === "thinking_delta" && block?.type === "thinking") block.thinking += delta.thinking;
  else if (delta.type === "signature_delta" && block?.type === "thinking") block.signature = delta.signature;
  else if (delta.type === "input_json_delta") json.set(index, (json.get(index) ?? "") + delta.partial_json);
}

/** A call's arguments; a call cut off by max_tokens has incomplete JSON, and then no input. */
function parseInput(text: string): unknown {
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}
