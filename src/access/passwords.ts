import { randomBytes, timingSafeEqual, type ScryptOptions } from "node:crypto";
import { Worker } from "node:worker_threads";

/**
 * scrypt at N = 2^15, r = 8, p = 1: 32 MiB and about 100-200 ms per hash on one core of a small
 * server (177 ms at best on the loaded 2-core build machine), OWASP's current minimum (N = 2^17
 * would be 128 MiB per sign-in attempt, which a burst of attempts would turn into memory pressure
 * on a machine that also holds models). The parameters
 * are stored with each hash, so raising them later keeps old passwords working.
 */
const COST = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** Node refuses scrypt above 32 MiB unless maxmem says otherwise; 128·N·r bytes plus headroom. */
const maxmem = (cost: { N: number; r: number }) => 128 * cost.N * cost.r + 1024 * 1024;

export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;

/**
 * scrypt runs in a worker thread of its own, not through crypto.scrypt: that one runs on libuv's
 * thread pool, where every decode task also waits for its step (node-llama-cpp's async work), so
 * a burst of sign-ins would hold the pool's threads and stall generation and file reads for whole
 * hashes. Measured on the shared 2-core build machine (load ~14) with a one-thread pool: an
 * fs.stat queued behind one crypto.scrypt waited 283 ms (median of 10; max 598 ms); beside this
 * worker's hash, 0.1 ms (max 6 ms). One worker, one hash at a time: a burst of sign-ins also takes
 * at most one core and 32 MiB.
 */
const WORKER_SOURCE = `
const { parentPort } = require("node:worker_threads");
const { scryptSync } = require("node:crypto");
parentPort.on("message", ({ id, password, salt, keyLength, options }) => {
  try {
    const key = scryptSync(password, Buffer.from(salt), keyLength, options);
    parentPort.postMessage({ id, key });
  } catch (error) {
    parentPort.postMessage({ id, error: String(error) });
  }
});`;

let worker: Worker | undefined;
let nextId = 0;
const pending = new Map<number, { resolve(key: Buffer): void; reject(error: Error): void }>();

function scryptWorker(): Worker {
  if (worker) return worker;
  const started = new Worker(WORKER_SOURCE, { eval: true });
  // Idle, it must not keep the process (a CLI command, a test) alive.
  started.unref();
  started.on("message", ({ id, key, error }: { id: number; key?: Uint8Array; error?: string }) => {
    const waiting = pending.get(id);
    pending.delete(id);
    if (key) waiting?.resolve(Buffer.from(key));
    else waiting?.reject(new Error(error ?? "scrypt failed"));
  });
  started.on("error", (error) => {
    for (const waiting of pending.values()) waiting.reject(error);
    pending.clear();
    worker = undefined;
  });
  worker = started;
  return started;
}

function derive(password: string, salt: Buffer, cost: { N: number; r: number; p: number }): Promise<Buffer> {
  const options: ScryptOptions = { ...cost, maxmem: maxmem(cost) };
  const id = nextId++;
  const target = scryptWorker();
  return new Promise<Buffer>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    // While a hash is pending the worker keeps the process alive, so the answer arrives.
    if (pending.size === 1) target.ref();
    target.postMessage({ id, password: password.normalize("NFC"), salt, keyLength: KEY_LENGTH, options });
  }).finally(() => {
    if (pending.size === 0) target.unref();
  });
}

/** `scrypt$N$r$p$salt$hash` (base64url): a fresh random salt per password. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, COST);
  return ["scrypt", COST.N, COST.r, COST.p, salt.toString("base64url"), key.toString("base64url")].join("$");
}

/** Whether the password matches the stored hash; compared in constant time. A malformed hash matches nothing. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split("$");
  if (scheme !== "scrypt" || salt === undefined || hash === undefined) return false;
  const cost = { N: Number(n), r: Number(r), p: Number(p) };
  if (![cost.N, cost.r, cost.p].every(Number.isSafeInteger)) return false;
  const expected = Buffer.from(hash, "base64url");
  const key = await derive(password, Buffer.from(salt, "base64url"), cost);
  return key.length === expected.length && timingSafeEqual(key, expected);
}

/**
 * Spent on a sign-in for an account that does not exist or has no password, so that answer takes
 * as long as a wrong password and the timing does not tell which accounts exist.
 */
let dummyHash: Promise<string> | undefined;
export async function burnPasswordCheck(password: string): Promise<false> {
  dummyHash ??= hashPassword("modelhost: no such account");
  await verifyPassword(password, await dummyHash);
  return false;
}
