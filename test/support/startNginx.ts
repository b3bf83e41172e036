// A throwaway nginx (the Debian package's binary) for the deployment test: its own prefix in a
// temporary directory, in the foreground, with the site configuration given by the caller inside a
// minimal main configuration. Tests call `needs("nginx")` first.
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { commandPath } from "./debianPackages.js";
import { spawnService } from "./spawnService.js";

export interface RunningNginx {
  stop(): Promise<void>;
  /** What nginx wrote to its error log so far (upstream failures are logged there). */
  errorLog(): Promise<string>;
}

const READY_TIMEOUT_MS = 10_000;

/**
 * Starts nginx with `site` (blocks of the `http` context: upstreams and servers) and resolves once
 * every port in `ports` accepts connections.
 */
export async function startNginx(site: string, ports: readonly number[]): Promise<RunningNginx> {
  const binary = commandPath("nginx", "nginx");
  const dir = await mkdtemp(path.join(os.tmpdir(), "modelhost-nginx-"));
  const errorLog = path.join(dir, "error.log");
  // As root, nginx's workers switch to an unprivileged user that could not write in this
  // (root-only) directory; they stay root here, which is only ever a throwaway loopback server.
  const user = process.getuid?.() === 0 ? "user root;\n" : "";
  const config = `${user}worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${errorLog} info;
events { worker_connections 1024; }
http {
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${site}
}
`;
  const configFile = path.join(dir, "nginx.conf");
  await writeFile(configFile, config);
  const { child, output, exited } = spawnService(binary, ["-p", dir, "-c", configFile, "-e", errorLog]);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGQUIT");
    await exited;
    await rm(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const ready = await Promise.all(ports.map(accepts));
    if (ready.every(Boolean)) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      const log = await readFile(errorLog, "utf8").catch(() => "");
      await stop();
      throw new Error(`nginx did not start:\n${output()}\n${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { stop, errorLog: () => readFile(errorLog, "utf8").catch(() => "") };
}

async function accepts(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/nginx-probe`, { signal: AbortSignal.timeout(1000) });
    await response.body?.cancel();
    return true;
  } catch {
    return false;
  }
}
