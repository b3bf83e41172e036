// A throwaway PostgreSQL server for tests: its own cluster in a temporary directory, on a free
// loopback port, deleted on stop(). Needs the server binaries: tests call `needs("postgresql")` first.
import { spawn } from "node:child_process";
import type { ChildProcess, SpawnOptions } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { commandPath } from "./debianPackages.js";
import { freePort } from "./freePort.js";

export interface TestPostgres {
  /** postgres://postgres@127.0.0.1:PORT/modelhost_test */
  url: string;
  stop(): Promise<void>;
}

const DATABASE = "modelhost_test";
const SUPERUSER = "postgres";
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;
const PORT_ATTEMPTS = 3;

export async function startPostgres(): Promise<TestPostgres> {
  const binDir = path.dirname(commandPath("postgresql", "postgres"));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "modelhost-pg-"));
  const owner = serverUser();
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true });
  let server: (Running & { port: number }) | undefined;
  // If the test process exits without stop() (a crash, an uncaught error), the server would
  // outlive it: SIGQUIT is the immediate shutdown, which also ends the server's children.
  const onExit = () => {
    server?.child.kill("SIGQUIT");
    removeDir();
  };
  process.once("exit", onExit);
  const stop = async () => {
    process.off("exit", onExit);
    if (server) await stopServer(server);
    removeDir();
  };
  try {
    await initdb(binDir, dir, owner);
    server = await startServer(binDir, dir, owner);
    await createDatabase(server.port);
    return { url: `postgres://${SUPERUSER}@127.0.0.1:${server.port}/${DATABASE}`, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

interface Owner {
  uid: number;
  gid: number;
}

/**
 * PostgreSQL refuses to run as root. As root (a container, CI), run it as the `postgres` system
 * user that Debian's package creates, or as `nobody`; as anyone else, as ourselves.
 */
function serverUser(): Owner | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const users = new Map(
    fs
      .readFileSync("/etc/passwd", "utf8")
      .split("\n")
      .map((line) => line.split(":"))
      .filter((fields) => fields.length >= 4)
      .map((fields) => [fields[0], { uid: Number(fields[2]), gid: Number(fields[3]) }] as const),
  );
  const owner = users.get("postgres") ?? users.get("nobody");
  if (!owner) throw new Error("Running as root, and there is neither a postgres nor a nobody user to run PostgreSQL as.");
  return owner;
}

/**
 * Creates the cluster. --no-sync only skips initdb's final flush of files that are thrown away
 * after the test; the server itself runs with fsync on. Trust authentication: it listens on
 * loopback only, and the socket directory is private to its user.
 */
async function initdb(binDir: string, dir: string, owner: Owner | undefined): Promise<void> {
  const args = ["-D", path.join(dir, "data"), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"];
  const code = await run(path.join(binDir, "initdb"), args, dir, owner).exit;
  if (code !== 0) throw new Error(`initdb exited with ${code}:\n${readLog(dir)}`);
}

/** Starts the server on a free port, retrying with another if a parallel test took it first. */
async function startServer(binDir: string, dir: string, owner: Owner | undefined): Promise<Running & { port: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const args = ["-D", path.join(dir, "data"), "-p", String(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on"];
    const server = run(path.join(binDir, "postgres"), args, dir, owner);
    let exited = false;
    void server.exit.then(() => (exited = true));
    try {
      await waitUntilAccepting(port, () => exited);
      return { ...server, port };
    } catch (error) {
      await stopServer(server);
      const log = readLog(dir);
      const portTaken = exited && /could not bind|already in use/i.test(log);
      if (!portTaken || attempt === PORT_ATTEMPTS) throw new Error(`postgres did not start (${String(error)}):\n${log}`, { cause: error });
    }
  }
}

interface Running {
  child: ChildProcess;
  /** The exit code, or the signal's name, or why it could not start. */
  exit: Promise<number | string>;
}

/**
 * Runs a PostgreSQL binary as `owner`, its output appended to postgres.log in the directory (read
 * when it fails). The exit is watched from the start: a process that fails to spawn emits 'error'
 * once, and a listener added later would wait forever.
 */
function run(command: string, args: string[], dir: string, owner: Owner | undefined): Running {
  const log = fs.openSync(path.join(dir, "postgres.log"), "a");
  const options: SpawnOptions = { cwd: dir, stdio: ["ignore", log, log], env: { ...process.env, LC_ALL: "C" }, ...owner };
  const child = spawn(command, args, options);
  fs.closeSync(log);
  const exit = new Promise<number | string>((resolve) => {
    child.once("error", (error) => resolve(error.message));
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"));
  });
  return { child, exit };
}

function readLog(dir: string): string {
  try {
    return fs.readFileSync(path.join(dir, "postgres.log"), "utf8").slice(-4_000);
  } catch {
    return "(no log)";
  }
}

/** Polls with real connections: the log's wording depends on the version and locale, a login does not. */
async function waitUntilAccepting(port: number, hasExited: () => boolean): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (hasExited()) throw new Error("postgres exited");
    const client = new pg.Client({ host: "127.0.0.1", port, user: SUPERUSER, database: "postgres" });
    try {
      await client.connect();
      await client.end();
      return;
    } catch (error) {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
}

async function createDatabase(port: number): Promise<void> {
  const client = new pg.Client({ host: "127.0.0.1", port, user: SUPERUSER, database: "postgres" });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await client.end();
  }
}

/** Fast shutdown (SIGINT): ends sessions, checkpoints, exits; SIGKILL if it hangs. */
async function stopServer({ child, exit }: Running): Promise<void> {
  child.kill("SIGINT");
  const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
  await exit;
  clearTimeout(timer);
}
