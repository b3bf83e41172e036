// `npm test` runs this first (the `pretest` script): it installs the Debian packages the tests need
// (test/support/debianPackages.ts lists them) that this machine lacks, when it can: as root, with
// apt-get. One line per package says what it installs and why. Nothing else is downloaded.
// Where it cannot (not root, no apt-get: a laptop), it says what is missing and the tests that
// need it skip; under CI=1 it fails instead, as those tests would.
//
// The install runs in the background, beside ESLint, tsc and the build that `npm test` runs next
// (apt-get mostly waits on the network and the disk; they keep the CPU busy): scripts/runTests.ts
// waits for it (`awaitTestPackages`) before the first test, prints how it went, and fails under
// CI=1 when a package is still missing.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { debianPackages, inCi, missingLine, missingPackages, type PackageName } from "../test/support/debianPackages.js";

const APT_GET = "/usr/bin/apt-get";
/**
 * Debian's hook that decides whether a package's install may start its service. While it answers
 * 101 ("not allowed"), postgresql and redis-server install without starting servers on 5432 and
 * 6379 that would outlive the tests: the tests start throwaway servers of their own.
 */
const POLICY_RC_D = "/usr/sbin/policy-rc.d";
/** How long the tests wait for a background install before giving up on it (apt-get is left running). */
const WAIT_LIMIT_MS = 20 * 60_000;

/**
 * Where a background install of this checkout leaves its pid, its output and its exit code: one
 * folder per checkout, so two checkouts testing at once do not read each other's install.
 */
const stateDir = path.join(
  os.tmpdir(),
  `modelhost-test-packages-${createHash("sha256")
    .update(path.resolve(import.meta.dirname, ".."))
    .digest("hex")
    .slice(0, 12)}`,
);
const pidFile = path.join(stateDir, "pid");
const logFile = path.join(stateDir, "log");
const doneFile = path.join(stateDir, "done");

/**
 * The `pretest` step: says what is missing, and when it can install it, starts the install in the
 * background and returns; where it cannot, prints one line on what is missing (and under CI=1 exits
 * non-zero). Nothing to do when everything is installed.
 */
function startTestPackages(): void {
  fs.rmSync(stateDir, { recursive: true, force: true });
  const missing = missingPackages(Object.keys(debianPackages) as PackageName[]);
  if (missing.length === 0) return;
  if (!(process.getuid?.() === 0 && fs.existsSync(APT_GET))) {
    reportMissing(missing, "not root with apt-get, so not installed here");
    return;
  }
  for (const name of missing) console.log(`installing ${name} (Debian package) for ${debianPackages[name].neededFor}`);
  fs.mkdirSync(stateDir, { recursive: true });
  const log = fs.openSync(logFile, "w");
  const child = spawn(process.execPath, ["--import", "tsx", import.meta.filename, "--install", ...missing], {
    detached: true,
    stdio: ["ignore", log, log],
    cwd: path.resolve(import.meta.dirname, ".."),
  });
  fs.closeSync(log);
  fs.writeFileSync(pidFile, String(child.pid));
  child.unref();
  console.log(`(apt-get runs in the background, beside ESLint, tsc and the build; the tests wait for it)`);
}

/**
 * Waits for the install `pretest` started (if any), prints its output, and reports what is still
 * missing in one line. Returns false when, under CI=1, a package is missing (the run must fail).
 */
export async function awaitTestPackages(): Promise<boolean> {
  if (!fs.existsSync(pidFile)) return true;
  const pid = Number(fs.readFileSync(pidFile, "utf8"));
  const started = performance.now();
  let waited = false;
  while (!fs.existsSync(doneFile) && isAlive(pid)) {
    if (performance.now() - started > WAIT_LIMIT_MS) {
      console.log(`the background apt-get install (pid ${pid}) is still running after ${WAIT_LIMIT_MS / 60_000} min; going on without it`);
      break;
    }
    if (!waited) console.log("waiting for the background apt-get install of the test packages");
    waited = true;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const output = fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8").trimEnd() : "";
  if (output) console.log(output);
  fs.rmSync(stateDir, { recursive: true, force: true });
  const stillMissing = missingPackages(Object.keys(debianPackages) as PackageName[]);
  if (stillMissing.length === 0) return true;
  return reportMissing(stillMissing, "apt-get did not install it");
}

function reportMissing(missing: PackageName[], why: string): boolean {
  console.log(`${missingLine(missing)} (${why}; ${inCi() ? "CI is set: failing" : "the tests that need it skip"})`);
  if (inCi()) process.exitCode = 1;
  return !inCi();
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The background process: installs `names`, then leaves its exit code in `doneFile`. */
function install(names: PackageName[]): void {
  const addedPolicy = !fs.existsSync(POLICY_RC_D);
  if (addedPolicy) fs.writeFileSync(POLICY_RC_D, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  const started = performance.now();
  let ok = false;
  try {
    // The package lists of a fresh machine are empty or stale: update once, only now that something is missing.
    ok = apt(["update"]) && apt(["install", "--yes", "--no-install-recommends", ...names]);
    if (ok) console.log(`installed ${names.join(", ")} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    if (addedPolicy) fs.rmSync(POLICY_RC_D, { force: true });
    fs.writeFileSync(doneFile, ok ? "0" : "1");
  }
}

/** Runs apt-get quietly; its output is shown only when it fails. */
function apt(args: string[]): boolean {
  const result = spawnSync(APT_GET, ["-q", ...args], { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (result.status === 0) return true;
  console.log(
    `apt-get ${args[0]} failed (${result.error?.message ?? `exit ${result.status}`}):\n${(result.stdout + result.stderr).slice(-4_000)}`,
  );
  return false;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const [mode, ...names] = process.argv.slice(2);
  if (mode === "--install") install(names as PackageName[]);
  else if (mode === "--wait") await awaitTestPackages();
  else startTestPackages();
}
