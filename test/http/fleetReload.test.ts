import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readSseEvents, postJson, startTestServer, type TestServer } from "../support/startTestServer.js";
import { startServerProcess, type ServerProcess } from "../support/startServerProcess.js";
import { testModelPath } from "../support/testModels.js";

/**
 * Issue 34: SIGHUP reads the --upstreams file again without dropping requests: a model added is
 * served from the next request on, a stream under way goes on to its end, and a file that does not
 * read keeps the upstreams as they were. The gateway runs as its own process (the signal is its).
 */
describe("reloading the upstreams on SIGHUP", () => {
  let worker: TestServer;
  let gateway: ServerProcess;
  let dir: string;
  let file: string;

  const declare = (models: Record<string, unknown>) => writeFile(file, JSON.stringify({ models }));
  const upstream = () => ({ model: "tiny", endpoints: [{ url: `${worker.url}/v1` }] });
  const ids = async () =>
    ((await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((model) => model.id).sort();

  beforeAll(async () => {
    // A long context: the stream kept open across the reload has seconds of tokens to go.
    worker = await startTestServer({ models: { tiny: await testModelPath("long-tiny") }, config: { contextSize: 32_768 } });
    dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-fleet-reload-"));
    file = path.join(dir, "upstreams.json");
    await declare({ first: upstream() });
    gateway = await startServerProcess(["--models-dir", path.join(dir, "models"), "--upstreams", file]);
  });
  afterAll(async () => {
    await gateway?.stop();
    await worker?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("serves a model added to the file from the next request on, and finishes the stream under way", async () => {
    expect(await ids()).toEqual(["first"]);
    const streaming = postJson(`${gateway.url}/v1/chat/completions`, {
      model: "first",
      stream: true,
      max_tokens: 3000,
      temperature: 0.8,
      messages: [{ role: "user", content: "Go on for a while." }],
    });
    const response = await streaming;
    expect(response.status).toBe(200);
    await declare({ first: upstream(), second: upstream() });
    gateway.signal("SIGHUP");
    await expect.poll(ids, { timeout: 5_000 }).toEqual(["first", "second"]);
    const events = await readSseEvents(response);
    const last = JSON.parse(events.at(-2)!) as { choices: Array<{ finish_reason: string | null }> };
    expect(events.at(-1)).toBe("[DONE]");
    expect(last.choices[0]!.finish_reason).toBe("length");
    const second = await postJson(`${gateway.url}/v1/chat/completions`, {
      model: "second",
      max_tokens: 4,
      messages: [{ role: "user", content: "Hi" }],
    });
    expect(second.status).toBe(200);
    expect(gateway.output()).toMatch(/modelhost: SIGHUP, reloaded .*upstreams\.json: 2 upstream models/);
  });

  it("keeps the upstreams as they were when the file does not read", async () => {
    await writeFile(file, "{ not json");
    gateway.signal("SIGHUP");
    await expect
      .poll(() => gateway.output(), { timeout: 5_000 })
      .toMatch(/modelhost: SIGHUP, The upstreams file .* cannot be read: .*The upstreams stay as they were\./);
    expect(await ids()).toEqual(["first", "second"]);
  });
});
