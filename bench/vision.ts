// Workload 6, vision (issue 33): a vision model reading one 448 × 448 image, against llama-server
// `--mmproj` on the same files. The text model is the run's; its projector has the shape of LLaVA
// 1.5's (CLIP ViT-L/14 at 336 pixels, 576 image tokens, F16: src/testmodels/projectorWriter.ts
// clipVitL336), with random weights. Every request shows a new image (no server may find it in its
// cache) and asks for one token:
//   TTFT   one request at a time: decoding the PNG, resizing it to 336 × 336, the encoder's forward
//          pass, and reading its 576 tokens and the text into the model;
//   rate   `concurrent` requests at once on as many slots: images/s.
import { mkdtemp, rm, symlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { readGgufHeader } from "../src/gguf/GgufReader.js";
import { clipVitL336 } from "../src/testmodels/projectorWriter.js";
import { encodePng } from "../test/support/images.js";
import { testProjectorPath } from "../test/support/testModels.js";
import { timeHttpStream } from "./httpStream.js";
import { names } from "./metrics.js";
import { median } from "./stats.js";
import { inTurn, withTargets, type ModelRun, type Target } from "./targets.js";

export interface VisionOptions {
  /** Requests timed one at a time, per server. */
  sequential: number;
  /** Requests at once, and the slots they run on. */
  concurrent: number;
  /** The image's side in pixels. */
  side: number;
}

/** A new picture for every request: gradients and stripes that depend on `seed`. */
function picture(side: number, seed: number): string {
  const png = encodePng(side, side, (x, y) => [(x * 3 + seed * 37) & 255, (y * 5 + seed * 11) & 255, ((x ^ y) + seed * 73) & 255]);
  return `data:image/png;base64,${png.toString("base64")}`;
}

function ask(target: Target, model: string, image: string) {
  return timeHttpStream(target.url, {
    model,
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: "Describe this picture." },
          { type: "image_url", image_url: { url: image } },
        ],
      },
    ],
    max_tokens: 1,
    temperature: 0,
  });
}

export async function benchVision(run: ModelRun, options: VisionOptions): Promise<void> {
  const header = await readGgufHeader(run.modelPath);
  const architecture = String(header.metadata.get("general.architecture"));
  const width = Number(header.metadata.get(`${architecture}.embedding_length`));
  const projector = await testProjectorPath(`clip-vit-l-336-${width}`, clipVitL336(width));
  // A folder of its own: the projector pairs with the model by name, and the other workloads'
  // servers (and their memory) do not load it.
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), "modelhost-bench-vision-"));
  await symlink(run.modelPath, path.join(modelsDir, `${run.preset}.gguf`));
  await symlink(projector, path.join(modelsDir, `mmproj-${run.preset}-f16.gguf`));
  let seed = 0;
  try {
    await withTargets(
      { ...run, modelsDir },
      "vision",
      { parallel: options.concurrent, contextSize: 1024, llamaServerArgs: ["--mmproj", projector] },
      async (targets) => {
        // The first encode allocates the encoder's buffers.
        for (const target of targets) await ask(target, run.preset, picture(options.side, seed++));
        const ttfts = new Map<string, number[]>(targets.map((target) => [target.key, []]));
        for (let round = 0; round < options.sequential; round++) {
          const results = await inTurn(targets, round, (target) => ask(target, run.preset, picture(options.side, seed++)));
          for (const [key, sample] of results) ttfts.get(key)!.push(sample.ttftMs);
        }
        const rates = await inTurn(targets, 0, async (target) => {
          const images = Array.from({ length: options.concurrent }, () => picture(options.side, seed++));
          const started = performance.now();
          await Promise.all(images.map((image) => ask(target, run.preset, image)));
          return (options.concurrent * 1000) / (performance.now() - started);
        });
        console.log(
          `\n### ${run.preset}: vision, one ${options.side} × ${options.side} image (a ${path.basename(projector)} projector, 576 image tokens)\n`,
        );
        console.log(`| | TTFT p50 (${options.sequential} requests) | images/s (${options.concurrent} at once) |`);
        console.log("| --- | ---: | ---: |");
        for (const target of targets) {
          const ttft = median(ttfts.get(target.key)!);
          run.figures.set(names.visionTtft(target.key), ttft);
          run.figures.set(names.visionRate(target.key), rates.get(target.key)!);
          console.log(`| ${target.label} | ${ttft.toFixed(0)} ms | ${rates.get(target.key)!.toFixed(3)} |`);
        }
        run.figures.ratio(names.visionTtftRatio(), names.visionTtft("modelhost"), names.visionTtft("llama_server"));
        run.figures.ratio(names.visionRateRatio(), names.visionRate("modelhost"), names.visionRate("llama_server"));
      },
    );
  } finally {
    await rm(modelsDir, { recursive: true, force: true });
  }
}
