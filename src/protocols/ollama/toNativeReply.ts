import type { ChatEvent } from "../../core/ChatEvent.js";
import { endedWithoutResult } from "../StreamTranslator.js";
import { NativeReplyStream, type NativeChunk, type ReplyContext } from "./NativeReplyStream.js";
import type { WireToolCall } from "./schemas.js";

/**
 * The reply of a `stream: false` request: the stream's objects merged as a client merges them,
 * text and thought concatenated and tool calls gathered, with the last object's reason and metrics.
 */
export async function toNativeReply(context: ReplyContext, events: AsyncIterable<ChatEvent>): Promise<NativeChunk> {
  const stream = new NativeReplyStream(context);
  let text = "";
  let thinking = "";
  const toolCalls: WireToolCall[] = [];
  let last: NativeChunk | undefined;
  for await (const event of events) {
    for (const chunk of stream.next(event)) {
      text += "message" in chunk ? chunk.message.content : chunk.response;
      thinking += ("message" in chunk ? chunk.message.thinking : chunk.thinking) ?? "";
      if ("message" in chunk) toolCalls.push(...(chunk.message.tool_calls ?? []));
      if (chunk.done) last = chunk;
    }
  }
  if (!last) throw endedWithoutResult();
  const thought = thinking === "" ? {} : { thinking };
  if (!("message" in last)) return { ...last, response: text, ...thought };
  return { ...last, message: { role: "assistant", content: text, ...thought, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) } };
}
