import { describeSpeculation } from "../support/speculationSuite.js";

// Issue 35: speculative decoding on the engine `--engine auto` picks (test/support/speculationSuite.ts).
describeSpeculation("auto");
