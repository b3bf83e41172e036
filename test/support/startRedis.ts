import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { commandPath } from "./debianPackages.js";
import { freePort } from "./freePort.js";
import { spawnService } from "./spawnService.js";

export interface RunningRedis {
  /** e.g. redis://127.0.0.1:41234 */
  url: string;
  /** Shuts the server down and removes its directory. Safe to call twice, or after `kill`. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash: the server vanishes without closing its connections politely. */
  kill(): Promise<void>;
  /** SIGSTOP: the server stalls, connections open, answering nothing, until `resume`. */
  pause(): void;
  resume(): void;
}

const READY_TIMEOUT_MS = 10_000;
const POLL_MS = 20;

/**
 * A throwaway redis-server (the Debian package's binary) on a free loopback port: no persistence,
 * its working directory a temporary one. Resolves once it answers PING. Tests call
 * `needs("redis-server")` first; without it, this rejects with the install hint.
 */
export async function startRedis(): Promise<RunningRedis> {
  const binary = commandPath("redis-server", "redis-server");
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-redis-"));
  const port = await freePort();
  const args = ["--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--port", String(port), "--daemonize", "no", "--dir", dir];
  const { child, output, exited } = spawnService(binary, args);
  let gone = false;
  void exited.then(() => (gone = true));
  try {
    await waitForPong(port, () => gone, output);
  } catch (error) {
    await end(child, exited, "SIGKILL");
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      await end(child, exited, "SIGTERM");
      await rm(dir, { recursive: true, force: true });
    },
    kill: () => end(child, exited, "SIGKILL"),
    pause() {
      child.kill("SIGSTOP");
    },
    resume() {
      child.kill("SIGCONT");
    },
  };
}

async function waitForPong(port: number, hasExited: () => boolean, output: () => string): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!(await answersPing(port))) {
    if (hasExited()) throw new Error(`redis-server exited before answering PING:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`redis-server did not answer PING within ${READY_TIMEOUT_MS} ms:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** One inline PING over a raw socket: no client library, so nothing to configure or close. */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let reply = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once("error", () => done(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk: Buffer) => {
      reply += chunk.toString();
      if (reply.includes("\r\n")) done(reply.startsWith("+PONG"));
    });
  });
}

async function end(child: ChildProcess, exited: Promise<void>, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill(signal);
    // A paused server would hold a SIGTERM until it runs again.
    child.kill("SIGCONT");
  }
  await exited;
}
