// The tool loop and the no-information path, against a scripted compatible test double that
// checks what the app sends.
import { afterEach, describe, expect, it } from "vitest";
import { answer, NO_INFORMATION, RoundLimitError } from "../src/agent.js";
import { ingest } from "../src/ingest.js";
import {
  axis,
  between,
  startScriptedService,
  type ChatMessage,
  type ScriptedReply,
  type ScriptedService,
} from "./support/scriptedService.js";
import { collector, createTestApp, type TestApp } from "./support/testApp.js";

/** The lighthouse document lies along axis 0; questions get the similarity their text names. */
function embedText(text: string): number[] {
  if (text.includes("lighthouse")) return axis(0);
  const similarity = /similarity (0\.\d+)/.exec(text)?.[1];
  return similarity ? between(0, 1, Number(similarity)) : axis(2);
}

const DOCS = { "lighthouse.md": "# Lighthouse\n\nThe lighthouse keeper lit the lamp at dusk." };

let service: ScriptedService;
let app: TestApp;

async function setUp(script: ScriptedReply[], maxRounds = 5): Promise<void> {
  service = await startScriptedService(script, embedText);
  app = createTestApp(service.baseURL, { maxRounds });
  await ingest(app.writeDocs(DOCS), { client: app.client, store: app.store, embeddingModel: "embed" });
}

afterEach(async () => {
  app?.close();
  await service?.close();
});

/** Checks the conversation rules on every request the double received; returns the tool messages' parsed contents. */
function checkConversation(requests: { messages?: ChatMessage[] }[]): unknown[] {
  const last = requests.at(-1)!.messages!;
  const results: unknown[] = [];
  for (const [i, message] of last.entries()) {
    if (message.role !== "tool") continue;
    // The nearest assistant message before this run of tool messages made the call it answers.
    let j = i - 1;
    while (last[j]!.role === "tool") j--;
    const assistant = last[j]!;
    expect(assistant.role).toBe("assistant");
    expect(assistant.tool_calls!.map((call) => call.id)).toContain(message.tool_call_id);
    results.push(JSON.parse(message.content!));
  }
  // One tool message per call, in the calls' order.
  for (const [j, message] of last.entries()) {
    if (message.role !== "assistant" || !message.tool_calls) continue;
    const answers = last.slice(j + 1, j + 1 + message.tool_calls.length);
    expect(answers.map((m) => [m.role, m.tool_call_id])).toEqual(message.tool_calls.map((call) => ["tool", call.id]));
  }
  return results;
}

describe("the tool loop, against a scripted service", () => {
  it("runs the tool phase unstreamed, then streams the final answer", async () => {
    await setUp([
      {
        kind: "tool_calls",
        calls: [
          { name: "calculate", arguments: '{"expression":"(17 + 25) * 2"}' },
          { name: "current_time", arguments: '{"time_zone":"Europe/Paris"}' },
        ],
      },
      { kind: "tool_calls", calls: [{ name: "search_documents", arguments: '{"query":"who lit the lighthouse lamp"}' }] },
      { kind: "text", pieces: ["(the unstreamed reply that ends the tool phase)"] },
      { kind: "text", pieces: ["The keeper", " lit it [1]; ", "84."] },
    ]);
    const { pieces, sources, events } = collector();
    await answer("Who lit the lighthouse lamp?", app, events);

    const chats = service.chatRequests();
    expect(chats.map((body) => Boolean(body.stream))).toEqual([false, false, false, true]);
    expect(chats.map((body) => body.tool_choice)).toEqual(["auto", "auto", "auto", "none"]);
    expect(pieces.join("")).toBe("The keeper lit it [1]; 84.");
    // The retrieved passage and its source went into the prompt.
    expect(chats[0]!.messages![0]!.content).toContain("[1] " + app.writeDocs({}) + "/lighthouse.md\n# Lighthouse");

    const results = checkConversation(chats);
    expect(results).toHaveLength(3);
    expect(results[0]).toEqual({ expression: "(17 + 25) * 2", result: 84 });
    expect(results[1]).toMatchObject({ time_zone: "Europe/Paris", utc: expect.stringMatching(/Z$/) });
    expect(results[2]).toMatchObject({ results: [{ source: expect.stringMatching(/lighthouse\.md$/), similarity: 1 }] });
    // Sources: the question's retrieval, then the model's own search.
    expect(sources).toHaveLength(2);
    expect(sources[0]![0]).toMatchObject({ used: true, band: "very strong", position: 0 });
  });

  it("reports a throwing tool, bad arguments and an unknown tool to the model as JSON errors", async () => {
    await setUp([
      {
        kind: "tool_calls",
        calls: [
          { name: "calculate", arguments: '{"expression":"2 +* 3"}' },
          { name: "current_time", arguments: '{"time_zone":"Mars/Olympus_Mons"}' },
          { name: "launch_rocket", arguments: "{}" },
          { name: "calculate", arguments: '{"expression":' },
        ],
      },
      { kind: "text", pieces: ["unused"] },
      { kind: "text", pieces: ["Sorry."] },
    ]);
    const { pieces, events } = collector();
    await answer("What is 2 +* 3 in the lighthouse?", app, events);
    const results = checkConversation(service.chatRequests()) as { error: string }[];
    expect(results.map((result) => Object.keys(result))).toEqual([["error"], ["error"], ["error"], ["error"]]);
    expect(results[0]!.error).toMatch(/unexpected "\*" at position 4/);
    expect(results[1]!.error).toMatch(/time zone/i);
    expect(results[2]!.error).toMatch(/unknown tool "launch_rocket"; available: search_documents, current_time, calculate/);
    expect(results[3]!.error).toMatch(/arguments are not valid JSON/);
    expect(pieces.join("")).toBe("Sorry.");
  });

  it("stops after the round bound with a clear message, never streaming", async () => {
    const call: ScriptedReply = { kind: "tool_calls", calls: [{ name: "calculate", arguments: '{"expression":"1+1"}' }] };
    await setUp([call, call, call, call], 2);
    const { pieces, events } = collector();
    const error = await answer("Keep calling, lighthouse.", app, events).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RoundLimitError);
    expect((error as Error).message).toBe(
      "Stopped: the model still asked for tools after 2 rounds (AGENT_MAX_ROUNDS=2), so there is no answer.",
    );
    const chats = service.chatRequests();
    // Two tool rounds ran; the third reply still asked for tools and was not acted on.
    expect(chats.map((body) => Boolean(body.stream))).toEqual([false, false, false]);
    expect(checkConversation(chats)).toHaveLength(2);
    expect(pieces).toEqual([]);
  });

  it("answers that there is no information, without asking the chat model, when no chunk passes the threshold", async () => {
    await setUp([{ kind: "text", pieces: ["must not be asked"] }]);
    for (const question of ["bananas?", "similarity 0.7499", "similarity 0.2"]) {
      const { pieces, sources, events } = collector();
      await answer(question, app, events);
      expect(pieces).toEqual([NO_INFORMATION]);
      expect(sources[0]!.every((match) => !match.used)).toBe(true);
    }
    expect(service.chatRequests()).toEqual([]);
  });

  it("uses a chunk just above the threshold, and bands the score", async () => {
    await setUp([
      { kind: "text", pieces: ["unstreamed"] },
      { kind: "text", pieces: ["streamed"] },
    ]);
    const { sources, events } = collector();
    await answer("similarity 0.7501", app, events);
    expect(sources[0]![0]).toMatchObject({ used: true, band: "related" });
    expect(sources[0]![0]!.similarity).toBeCloseTo(0.7501, 5);
    expect(service.chatRequests()).toHaveLength(2);
  });
});
