// The deployment tests run docs/deploy.md's configuration verbatim, with only its addresses
// changed: its nginx block (test/deploy/nginxReplicas.test.ts, test/engine/gatewayFleet.test.ts)
// and its upstreams file (gatewayFleet). A change to either block's shape fails here, naming it.
import { readFileSync } from "node:fs";
import path from "node:path";

function deployDoc(): string {
  return readFileSync(path.resolve(import.meta.dirname, "../../docs/deploy.md"), "utf8");
}

/** The ```nginx block of docs/deploy.md, with its listen port and upstream ports replaced. */
export function documentedSite(ports: { listen: number; replicas: readonly [number, number] }): string {
  const block = /```nginx\n([\s\S]*?)```/.exec(deployDoc())?.[1];
  if (block === undefined) throw new Error("docs/deploy.md has no ```nginx block");
  let replica = 0;
  const site = block
    .replace(/listen 127\.0\.0\.1:8080;/, `listen 127.0.0.1:${ports.listen};`)
    .replace(/server 127\.0\.0\.1:1143[45]/g, () => `server 127.0.0.1:${ports.replicas[replica++]}`);
  if (replica !== 2 || !site.includes(`listen 127.0.0.1:${ports.listen};`))
    throw new Error("docs/deploy.md's nginx block changed shape: update this test");
  return site;
}

/**
 * The first ```json block of docs/deploy.md's "Models served by upstream servers" (the fleet's
 * upstreams file), with each documented base URL (`http://10.0.0.21:11434`) replaced by the one in
 * `addresses`; every one of them must occur.
 */
export function documentedUpstreams(addresses: Readonly<Record<string, string>>): string {
  const block = /## Models served by upstream servers[\s\S]*?```json\n([\s\S]*?)```/.exec(deployDoc())?.[1];
  if (block === undefined) throw new Error('docs/deploy.md has no ```json block under "Models served by upstream servers"');
  let file = block;
  for (const [documented, actual] of Object.entries(addresses)) {
    if (!file.includes(documented)) throw new Error(`docs/deploy.md's upstreams file no longer names ${documented}: update this test`);
    file = file.replaceAll(documented, actual);
  }
  return file;
}
