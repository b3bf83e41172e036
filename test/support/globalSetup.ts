// Vitest global setup: generate the tiny test model once, before the worker processes start,
// so model tests do not each pay for (or race on) generating it.
import { testModelPath } from "./testModels.js";

export default async function setup(): Promise<void> {
  await testModelPath("tiny");
}
