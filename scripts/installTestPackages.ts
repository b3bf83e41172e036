// `npm test` runs this first (the `pretest` script): it installs the Debian packages the tests need
// (test/support/debianPackages.ts lists them) that this machine lacks, when it can: as root, with
// apt-get. One line per package says what it installs and why. Nothing else is downloaded.
// Where it cannot (not root, no apt-get: a laptop), it says what is missing and the tests that
// need it skip; under CI=1 it fails instead, as those tests would.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { debianPackages, inCi, missingLine, missingPackages, type PackageName } from "../test/support/debianPackages.js";

const APT_GET = "/usr/bin/apt-get";
/**
 * Debian's hook that decides whether a package's install may start its service. While it answers
 * 101 ("not allowed"), postgresql and redis-server install without starting servers on 5432 and
 * 6379 that would outlive the tests: the tests start throwaway servers of their own.
 */
const POLICY_RC_D = "/usr/sbin/policy-rc.d";

const missing = missingPackages(Object.keys(debianPackages) as PackageName[]);
if (missing.length > 0) {
  const canInstall = process.getuid?.() === 0 && fs.existsSync(APT_GET);
  if (canInstall) install(missing);
  const stillMissing = missingPackages(missing);
  if (stillMissing.length > 0) {
    const why = canInstall ? "apt-get did not install it" : "not root with apt-get, so not installed here";
    console.log(`${missingLine(stillMissing)} (${why}; ${inCi() ? "CI is set: failing" : "the tests that need it skip"})`);
    if (inCi()) process.exit(1);
  }
}

function install(names: PackageName[]): void {
  for (const name of names) console.log(`installing ${name} (Debian package) for ${debianPackages[name].neededFor}`);
  const addedPolicy = !fs.existsSync(POLICY_RC_D);
  if (addedPolicy) fs.writeFileSync(POLICY_RC_D, "#!/bin/sh\nexit 101\n", { mode: 0o755 });
  const started = performance.now();
  try {
    // The package lists of a fresh machine are empty or stale: update once, only now that something is missing.
    if (apt(["update"]) && apt(["install", "--yes", "--no-install-recommends", ...names])) {
      console.log(`installed ${names.join(", ")} in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    }
  } finally {
    if (addedPolicy) fs.rmSync(POLICY_RC_D, { force: true });
  }
}

/** Runs apt-get quietly; its output is shown only when it fails. */
function apt(args: string[]): boolean {
  const result = spawnSync(APT_GET, ["-q", ...args], { encoding: "utf8", env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" } });
  if (result.status === 0) return true;
  console.log(`apt-get ${args[0]} failed (${result.error?.message ?? `exit ${result.status}`}):\n${(result.stdout + result.stderr).slice(-4_000)}`);
  return false;
}
