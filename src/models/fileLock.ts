import { open, readFile, rm, stat } from "node:fs/promises";
import { ServerError } from "../core/ServerError.js";

export interface FileLockOptions {
  /** How long to wait for a lock another holder has; 0 fails at once. */
  waitMs: number;
  /** A lock file older than this is a crash's leftover (Infinity: only a dead holder's lock is). */
  staleAfterMs: number;
  /** Said when the lock stays taken, e.g. "models.json is locked by another modelhost process". */
  busyMessage: string;
}

const retryEveryMs = 20;

/**
 * Runs `work` holding a lock file (created exclusively, holding our pid), so that processes sharing
 * a models directory (a server and a CLI command) take turns. A lock whose process is gone, or that
 * is older than `staleAfterMs`, is taken over.
 */
export async function withFileLock<T>(lock: string, options: FileLockOptions, work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + options.waitMs;
  for (;;) {
    try {
      const handle = await open(lock, "wx");
      await handle.writeFile(String(process.pid));
      await handle.close();
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") throw new ServerError("internal_error", { message: "The models directory does not exist.", cause: error });
      if (code !== "EEXIST") throw error;
      if (await isStale(lock, options.staleAfterMs)) {
        await rm(lock, { force: true });
        continue;
      }
      if (Date.now() >= deadline) throw new ServerError("invalid_request", { message: options.busyMessage });
      await new Promise((resolve) => setTimeout(resolve, retryEveryMs));
    }
  }
  try {
    return await work();
  } finally {
    await rm(lock, { force: true });
  }
}

async function isStale(lock: string, staleAfterMs: number): Promise<boolean> {
  try {
    const [stats, text] = await Promise.all([stat(lock), readFile(lock, "utf8")]);
    const pid = Number(text);
    if (Number.isInteger(pid) && pid > 0 && !isAlive(pid)) return true;
    return Date.now() - stats.mtimeMs > staleAfterMs;
  } catch {
    return false; // just released: try again
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
