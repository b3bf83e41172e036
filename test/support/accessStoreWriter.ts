// The child process of sqliteDurability.test.ts: writes to a SQLite access store as fast as it can
// until it is killed, printing each write only after its promise resolved, so every line on stdout
// is a write the store reported as committed. stdout is a pipe, which Node writes synchronously.
import { SqliteAccessStore } from "../../src/access/SqliteAccessStore.js";
import { generateToken } from "../../src/access/tokenFormat.js";

const file = process.argv[2];
if (!file) throw new Error("usage: accessStoreWriter.ts FILE");

const store = SqliteAccessStore.open(file);
const account = await store.createAccount(`writer-${process.pid}`, "free");
process.stdout.write(`account ${account.id}\n`);
for (let i = 0; ; i++) {
  const { prefix, hash } = generateToken();
  const token = await store.createToken({ accountId: account.id, name: `token-${i}`, prefix, hash, expiresAt: null });
  process.stdout.write(`token ${token.id} ${hash}\n`);
  await store.recordUsage([
    { accountId: account.id, tokenId: token.id, model: "tiny", day: "2025-03-01", requests: 1, promptTokens: i, completionTokens: 1 },
  ]);
  process.stdout.write(`usage ${token.id} ${i}\n`);
}
