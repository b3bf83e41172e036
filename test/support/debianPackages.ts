// What the tests need from the machine besides npm packages: Debian packages, each with the
// commands that show it is installed and the tests that need it. This is the one list: the
// `pretest` script (scripts/installTestPackages.ts) installs what is missing from it, and the
// tests ask `needs()` here before starting a server or a build. Adding a package is one line.
import fs from "node:fs";
import path from "node:path";

interface DebianPackage {
  /** Every one of these must be found (see `searchDirs`) for the package to count as installed. */
  commands: readonly string[];
  /** Completes "installing X (Debian package) for ...". */
  neededFor: string;
}

export const debianPackages = {
  postgresql: { commands: ["initdb", "postgres"], neededFor: "the PostgreSQL access-store and two-replica tests" },
  "redis-server": { commands: ["redis-server"], neededFor: "the Redis rate-limiter and two-replica tests" },
  // `modelhost engine build` compiles llama.cpp from the source bundled in node-llama-cpp; so does
  // test/support/llamaCppBuild.ts, for llama-tokenize.
  cmake: { commands: ["cmake"], neededFor: "the native engine build and llama-tokenize cross-check tests" },
  "g++": { commands: ["g++"], neededFor: "the native engine build and llama-tokenize cross-check tests" },
  make: { commands: ["make"], neededFor: "the native engine build and llama-tokenize cross-check tests" },
  git: { commands: ["git"], neededFor: "the native engine build and llama-tokenize cross-check tests" },
  // `script` runs the server in a pseudo-terminal (Essential in Debian: always there).
  bsdutils: { commands: ["script"], neededFor: "the start command's terminal-log test" },
  // `modelhost run` is driven in a real terminal: a tmux pane, keys sent, the screen read.
  tmux: { commands: ["tmux"], neededFor: "the `modelhost run` terminal test" },
  // The sample agent's page is tested in a real headless browser, driven by playwright-core.
  chromium: { commands: ["chromium"], neededFor: "the browser tests of the sample agent and the playground" },
  // The deployment test runs docs/deploy.md's nginx configuration in front of two replicas.
  nginx: { commands: ["nginx"], neededFor: "the nginx two-replica deployment test" },
} as const satisfies Record<string, DebianPackage>;

export type PackageName = keyof typeof debianPackages;

/** The build tools of `modelhost engine build` (and of llama.cpp's own tools, test/support/llamaCppBuild.ts). */
export const engineBuildTools: PackageName[] = ["cmake", "g++", "make", "git"];

/**
 * Where commands are looked for: Debian installs PostgreSQL's server binaries in
 * /usr/lib/postgresql/VERSION/bin, outside PATH (the newest version first), and daemons such as
 * nginx in /usr/sbin, which is not on a non-root user's PATH; then PATH itself (Homebrew, other
 * distributions).
 */
function searchDirs(): string[] {
  const postgresRoot = "/usr/lib/postgresql";
  const postgres = fs.existsSync(postgresRoot)
    ? fs
        .readdirSync(postgresRoot)
        .filter((version) => /^\d+$/.test(version))
        .sort((a, b) => Number(b) - Number(a))
        .map((version) => path.join(postgresRoot, version, "bin"))
    : [];
  const onPath = (process.env.PATH ?? "").split(path.delimiter).filter(Boolean);
  return [...new Set([...postgres, "/usr/sbin", ...onPath])];
}

/** The directory holding all of the package's commands, or undefined when it is not installed. */
export function packageDir(name: PackageName): string | undefined {
  const { commands } = debianPackages[name];
  return searchDirs().find((dir) => commands.every((command) => isExecutable(path.join(dir, command))));
}

/** The full path of one of a package's commands; throws the install hint when it is missing. */
export function commandPath(name: PackageName, command: string): string {
  const dir = packageDir(name);
  if (dir === undefined) throw new Error(missingLine([name]));
  return path.join(dir, command);
}

export function missingPackages(names: readonly PackageName[]): PackageName[] {
  return names.filter((name) => packageDir(name) === undefined);
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** CI installs everything (`npm test` as root does), so there a missing package is a broken set-up. */
export function inCi(): boolean {
  return !["", "0", "false"].includes((process.env.CI ?? "").toLowerCase());
}

/** e.g. "redis-server not installed (Debian package); install: apt-get install redis-server, or run `npm test` as root, which installs it." */
export function missingLine(missing: readonly PackageName[]): string {
  const one = missing.length === 1;
  return `${missing.join(", ")} not installed (Debian package${one ? "" : "s"}); install: apt-get install ${missing.join(" ")}, or run \`npm test\` as root, which installs ${one ? "it" : "them"}.`;
}

const reported = new Set<string>();

/**
 * Whether the tests needing these packages can run. When one is missing: with CI set, throws (the
 * test file fails, naming it); otherwise prints one line naming it and how to install it, and
 * returns false for the caller to skip (`describe.skipIf(!needs("redis-server"))`).
 */
export function needs(...names: PackageName[]): boolean {
  const missing = missingPackages(names);
  if (missing.length === 0) return true;
  const line = missingLine(missing);
  if (inCi()) throw new Error(`CI is set, so this fails instead of skipping. ${line}`);
  if (!reported.has(line)) {
    reported.add(line);
    console.warn(`skipped: ${line}`);
  }
  return false;
}
