import { describe } from "vitest";
import { engineBuildTools, needs } from "../support/debianPackages.js";
import { ensureNativeEngine } from "../support/nativeEngine.js";
import { describeSpeculation } from "../support/speculationSuite.js";

// Issue 35: speculative decoding on the native build, whose generation steps are decoded and
// sampled natively and run on in its native loop between drafts (test/support/speculationSuite.ts).
// Without cmake, g++, make or git the native build cannot be made: skipped (failed under CI).
describe.skipIf(!needs(...engineBuildTools))("on the native build", () => describeSpeculation("native", ensureNativeEngine));
