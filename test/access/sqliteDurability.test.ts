// A committed token or usage row must survive the process being killed with SIGKILL mid-write: a
// child writes as fast as it can, printing each write after its promise resolved; the test kills
// it, reopens the file and looks for every printed write.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterEach, beforeEach, expect, it } from "vitest";
import { SqliteAccessStore } from "../../src/access/SqliteAccessStore.js";

const repoRoot = fileURLToPath(new URL("../..", import.meta.url));
const writerScript = fileURLToPath(new URL("../support/accessStoreWriter.ts", import.meta.url));
/** Kill after at least this many printed writes, then a random few milliseconds more. */
const WRITES_BEFORE_KILL = 200;
const ROUNDS = 3;

interface Printed {
  accountId: string;
  tokens: Map<string, string>;
  usage: Map<string, number>;
}

let dir = "";
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "modelhost-durability-"));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

it("keeps every token and usage row whose write resolved when the writer is killed with SIGKILL", async () => {
  const file = path.join(dir, "modelhost.db");
  // Each round recovers the previous round's WAL, then is killed in turn.
  for (let round = 0; round < ROUNDS; round++) {
    const printed = await writeUntilKilled(file);
    expect(printed.tokens.size).toBeGreaterThanOrEqual(WRITES_BEFORE_KILL / 2);

    const store = SqliteAccessStore.open(file);
    try {
      const tokens = new Map((await store.listTokens(printed.accountId)).map((token) => [token.id, token]));
      for (const [id, hash] of printed.tokens) {
        expect(tokens.has(id), id).toBe(true);
        expect((await store.findTokenByHash(hash))?.token.id).toBe(id);
      }
      const usage = new Map((await store.usage({ accountId: printed.accountId })).map((row) => [row.tokenId, row]));
      for (const [tokenId, promptTokens] of printed.usage) {
        expect(usage.get(tokenId), tokenId).toMatchObject({ requests: 1, promptTokens, completionTokens: 1 });
      }
    } finally {
      await store.close();
    }
    expect(integrityCheck(file)).toBe("ok");
  }
});

/** Runs the writer on `file`, SIGKILLs it mid-loop, and returns what it printed (complete lines only). */
async function writeUntilKilled(file: string): Promise<Printed> {
  const child = spawn(process.execPath, ["--import", "tsx", writerScript, file], { cwd: repoRoot, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  let killing = false;
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    if (!killing && stdout.split("\n").length > WRITES_BEFORE_KILL) {
      killing = true;
      // At a random point of a later write, not always right after a print.
      setTimeout(() => child.kill("SIGKILL"), Math.random() * 10);
    }
  });
  const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.once("close", (_code, closeSignal) => resolve(closeSignal)));
  expect(signal, `the writer stopped on its own:\n${stderr}`).toBe("SIGKILL");
  return parsePrinted(stdout);
}

function parsePrinted(stdout: string): Printed {
  const printed: Printed = { accountId: "", tokens: new Map(), usage: new Map() };
  // The last line may have been cut by the kill.
  for (const line of stdout.split("\n").slice(0, -1)) {
    const [kind, id = "", value = ""] = line.split(" ");
    if (kind === "account") printed.accountId = id;
    else if (kind === "token") printed.tokens.set(id, value);
    else if (kind === "usage") printed.usage.set(id, Number(value));
    else throw new Error(`unexpected line from the writer: ${line}`);
  }
  return printed;
}

function integrityCheck(file: string): unknown {
  const db = new Database(file, { readonly: true });
  try {
    return db.pragma("integrity_check", { simple: true });
  } finally {
    db.close();
  }
}
