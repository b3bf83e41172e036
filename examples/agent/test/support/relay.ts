// Starts the relay (page and /stream) on a free loopback port, and reads SSE with a spec-conformant parser.
import type { AddressInfo } from "node:net";
import { createParser, type EventSourceMessage } from "eventsource-parser";
import type { AgentDeps } from "../../src/agent.js";
import { createRelay } from "../../src/server.js";

export async function startRelay(deps: AgentDeps): Promise<{ url: string; close(): Promise<void> }> {
  const server = createRelay(deps);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The events of a whole SSE body, as the browser's EventSource would see them. */
export function parseSse(body: string): EventSourceMessage[] {
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event) });
  parser.feed(body);
  return events;
}
