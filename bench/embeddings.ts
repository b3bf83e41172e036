import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { Llama } from "node-llama-cpp";
import { testModelPath, type CachedTestModelPreset } from "../test/support/testModels.js";
import { startModelhost } from "./servers.js";
import { median } from "./stats.js";

const texts = Array.from({ length: 64 }, (_, i) => `Short passage number ${i} about lighthouses, keepers and the sea at night.`);

async function timeIt(run: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await run();
  return performance.now() - started;
}

async function postEmbeddings(url: string, model: string, input: string | string[]): Promise<void> {
  const response = await fetch(`${url}/v1/embeddings`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, input, encoding_format: "base64" }),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  await response.arrayBuffer();
}

/**
 * Embeddings per second for 64 short texts: one batch request, and 64 single requests sent at once,
 * through the HTTP API; against node-llama-cpp's embedding context in process.
 */
export async function benchEmbeddings(
  llama: Llama,
  preset: CachedTestModelPreset,
  options: { runs: number; threads: number; engine: string },
): Promise<void> {
  const modelPath = await testModelPath(preset);
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-"));
  await symlink(modelPath, path.join(modelsDir, `${preset}.gguf`));
  const model = await llama.loadModel({ modelPath });
  const context = await model.createEmbeddingContext({ contextSize: 512, batchSize: 512, threads: options.threads });
  const server = await startModelhost({
    modelPath,
    modelsDir,
    threads: options.threads,
    parallel: 4,
    contextSize: 512,
    engine: options.engine,
  });
  try {
    const inProcess = async () => {
      for (const text of texts) await context.getEmbeddingFor(text);
    };
    const batch = () => postEmbeddings(server.url, preset, texts);
    const singles = () => Promise.all(texts.map((text) => postEmbeddings(server.url, preset, text)));
    await inProcess();
    await batch();
    await singles();
    const times = { inProcess: [] as number[], batch: [] as number[], singles: [] as number[] };
    for (let run = 0; run < options.runs; run++) {
      times.inProcess.push(await timeIt(inProcess));
      times.batch.push(await timeIt(batch));
      times.singles.push(await timeIt(singles));
    }
    const rate = (ms: number[]) => (texts.length * 1000) / median(ms);
    console.log(`\n## ${preset} embeddings — ${options.threads} threads, 64 short texts, median of ${options.runs} runs\n`);
    console.log("| | embeddings/s |");
    console.log("| --- | ---: |");
    console.log(`| node-llama-cpp in process (64 × getEmbeddingFor) | ${rate(times.inProcess).toFixed(0)} |`);
    console.log(`| modelhost HTTP, one request of 64 | ${rate(times.batch).toFixed(0)} |`);
    console.log(`| modelhost HTTP, 64 requests at once | ${rate(times.singles).toFixed(0)} |`);
    console.log(
      `\nHTTP batch / in process: ${(rate(times.batch) / rate(times.inProcess)).toFixed(2)}×; 64 requests / in process: ${(rate(times.singles) / rate(times.inProcess)).toFixed(2)}×`,
    );
  } finally {
    await server.stop();
    await context.dispose();
    await model.dispose();
    await rm(modelsDir, { recursive: true, force: true });
  }
}
