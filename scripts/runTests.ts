// `npm test` after its `pretest` (scripts/installTestPackages.ts, which starts the apt-get install
// of missing test packages in the background). First the checks: ESLint, tsc and the build, side
// by side (each is mostly one thread; on two cores together they take about half the time), their
// output printed whole as each ends; any failing stops here. Then, once the background install is
// done, Vitest in two runs: every suite but test/engine, then test/engine alone (the native build
// takes minutes and holds node-llama-cpp's build lock, which would stall model tests running beside
// it). The second runs even when the first failed, so one `npm test` reports on everything; then
// one closing line adds both up, and the exit code is non-zero if either failed.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { awaitTestPackages } from "./installTestPackages.js";

/** The npm scripts run before the tests, side by side. */
const checks = ["lint", "typecheck", "build"];

interface Stage {
  name: string;
  args: string[];
}

const stages: Stage[] = [
  { name: "all but test/engine", args: ["--exclude", "test/engine/**"] },
  // One file at a time: each decodes with llama.cpp's OpenMP team of --threads (2) threads, which
  // spin while they wait; two files at once on 2 cores made a 35 µs decode step take 3 ms, and the
  // native loop's tests ran past their 60 s.
  { name: "test/engine (native llama.cpp build)", args: ["test/engine", "--no-file-parallelism"] },
];

/** The parts of Vitest's JSON report read here. */
interface JsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  testResults: { status: string; assertionResults: { status: string }[] }[];
}

const checksStarted = performance.now();
const checkResults = await Promise.all(checks.map(runCheck));
const failedChecks = checkResults.filter((ok) => !ok).length;
console.log(
  `\n${failedChecks === 0 ? "checks passed" : `${failedChecks} of ${checks.length} checks failed`} (${checks.join(", ")}) in ${seconds(checksStarted)} s`,
);
if (failedChecks > 0) process.exit(1);
if (!(await awaitTestPackages())) process.exit(1);

const vitest = path.resolve(import.meta.dirname, "../node_modules/vitest/vitest.mjs");
const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), "modelhost-test-report-"));
const summaries: string[] = [];
const totals = { passed: 0, failed: 0, skipped: 0 };
let failed = false;
try {
  for (const [index, stage] of stages.entries()) {
    const reportFile = path.join(reportDir, `${index}.json`);
    console.log(`\n== vitest: ${stage.name}`);
    const result = spawnSync(
      process.execPath,
      [vitest, "run", ...stage.args, "--reporter=default", "--reporter=json", `--outputFile.json=${reportFile}`],
      { stdio: "inherit" },
    );
    const report = readReport(reportFile);
    if (result.status !== 0 || report === undefined) failed = true;
    if (report === undefined) {
      summaries.push(`${stage.name}: no report (vitest exited with ${result.status ?? result.signal})`);
      continue;
    }
    // A file that failed as a whole (it could not load: a missing service under CI; a failing hook)
    // may have no failed test of its own: it counts as one failure.
    const brokenFiles = report.testResults.filter(
      (file) => file.status === "failed" && !file.assertionResults.some((test) => test.status === "failed"),
    ).length;
    const counts = {
      passed: report.numPassedTests,
      failed: report.numFailedTests + brokenFiles,
      skipped: report.numPendingTests + report.numTodoTests,
    };
    totals.passed += counts.passed;
    totals.failed += counts.failed;
    totals.skipped += counts.skipped;
    const broken = brokenFiles > 0 ? ` (${brokenFiles} of them a whole file)` : "";
    summaries.push(`${stage.name}: ${counts.passed} passed, ${counts.failed} failed${broken}, ${counts.skipped} skipped`);
  }
} finally {
  fs.rmSync(reportDir, { recursive: true, force: true });
}

console.log(`\n${summaries.join("\n")}`);
// The plain closing line that any CI reads: "N passed, N failed, N skipped".
console.log(`tests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
process.exit(failed ? 1 : 0);

/** Runs `npm run <name>`, printing its output in one piece when it ends. Resolves to whether it passed. */
function runCheck(name: string): Promise<boolean> {
  const started = performance.now();
  const npm = process.env.npm_execpath;
  // Under `npm test`, npm_execpath is npm's own script: run it with this node, as npm does.
  const [command, args] = npm ? [process.execPath, [npm, "run", name]] : ["npm", ["run", name]];
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, FORCE_COLOR: process.env.FORCE_COLOR ?? (process.stdout.isTTY ? "1" : "0") },
    });
    const output: Buffer[] = [];
    child.stdout.on("data", (chunk: Buffer) => output.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => output.push(chunk));
    child.on("error", (error) => output.push(Buffer.from(`${error.message}\n`)));
    child.on("close", (code, signal) => {
      const ok = code === 0;
      process.stdout.write(
        `\n== npm run ${name}: ${ok ? "passed" : `failed (${code ?? signal})`} in ${seconds(started)} s\n${Buffer.concat(output).toString().trimEnd()}\n`,
      );
      resolve(ok);
    });
  });
}

function seconds(since: number): string {
  return ((performance.now() - since) / 1000).toFixed(0);
}

function readReport(file: string): JsonReport | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8")) as JsonReport;
  } catch {
    return undefined;
  }
}
