import path from "node:path";
import { GgufRefusal, readGgufHeader, type GgufHeader } from "../gguf/GgufReader.js";
import { modelFileParts } from "./modelFiles.js";

/**
 * Validates a model's file, and every other part of a split one (llama.cpp opens them all from
 * the first, and each has a GGUF header of its own), with the bounded reader: the gate every file
 * passes before llama.cpp or node-llama-cpp sees it. Returns the first part's header; throws
 * GgufRefusal, naming the part if it is not the first, for one that is not sound.
 */
export async function checkModelFile(file: string): Promise<GgufHeader> {
  const [first, ...others] = modelFileParts(file);
  const header = await readGgufHeader(first ?? file);
  for (const part of others) {
    try {
      await readGgufHeader(part);
    } catch (error) {
      if (!(error instanceof GgufRefusal)) throw error;
      throw new GgufRefusal(error.code, `part ${path.basename(part)}: ${error.detail}`);
    }
  }
  return header;
}
