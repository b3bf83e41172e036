import { BlockList, isIP } from "node:net";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ServerError } from "../core/ServerError.js";
import type { RouteAccess } from "./routeAccess.js";

/**
 * The doors a web page could otherwise walk through. A browser lets any page send a "simple"
 * cross-origin request (a POST with `Content-Type: text/plain`, a form, `navigator.sendBeacon`,
 * `fetch` with `mode: "no-cors"`) without asking the server first; CORS then only hides the
 * response from the page, after the request has done its work. And a page on a domain that the
 * attacker re-resolves to 127.0.0.1 (DNS rebinding) is, to the browser, of the server's own origin.
 * Both checks run in `onRequest`, before the body is read and before any route does anything.
 */
export interface BrowserPolicy {
  /** Origins allowed besides the server's own (--cors-origins). */
  allowOrigin: (origin: string) => boolean;
  /**
   * The routes whose callers a browser's ambient credentials could stand for: every route in the
   * local profile, which checks no credential at all; the cookie routes of the hosted playground
   * ("session", "sign-in"). A bearer token is no ambient credential: a page must hold it to send it.
   */
  originChecked: (access: RouteAccess | undefined) => boolean;
  /** Whether a `Host` name may be answered; absent: any (the server is reached by names it cannot know). */
  allowHost?: (hostname: string) => boolean;
}

/** The server's own origin as the browser sees it (behind a trusted proxy, the proxy's scheme and host). */
export function ownOrigin(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

export function guardBrowsers(app: FastifyInstance, policy: BrowserPolicy): void {
  app.addHook("onRequest", async (request) => {
    // First the Host: a rebound page's requests carry the attacker's name there, whatever their Origin.
    if (policy.allowHost) {
      const hostname = request.hostname;
      if (!policy.allowHost(hostname)) {
        throw new ServerError("host_not_allowed", {
          message: `This server does not answer to the host name ${JSON.stringify(hostname)}. Reach it as localhost or 127.0.0.1, or name the host in --allowed-hosts.`,
        });
      }
    }
    const origin = request.headers.origin;
    // No Origin: not a browser's cross-origin request (curl, the SDKs, a page's own navigation).
    if (origin === undefined || !policy.originChecked(request.routeOptions.config.access)) return;
    // `null` (sandboxed frames, pages opened from files) is never the server's own, and is allowed
    // only by a pattern that allows every origin.
    if (origin.toLowerCase() === ownOrigin(request).toLowerCase() || policy.allowOrigin(origin)) return;
    throw new ServerError("origin_not_allowed", {
      message: `A web page at ${origin} may not call this server. Allow that origin with --cors-origins if it is yours.`,
    });
  });
}

/**
 * Which `Host` names are answered. Listening on loopback, only loopback names (`localhost`, any
 * `*.localhost`, which browsers resolve to loopback themselves, 127.0.0.0/8 and ::1) and the
 * --allowed-hosts: a DNS-rebinding attacker controls only names of their own domains. Listening on
 * any other address, only the --allowed-hosts when some are set, else every name.
 *
 * A pattern is a host name (`models.example.com`), a wildcard of its subdomains (`*.example.com`)
 * or `*` for any; ports are not part of it.
 */
export function hostMatcher(listenHost: string, allowedHosts: readonly string[]): ((hostname: string) => boolean) | undefined {
  const patterns = allowedHosts.map((pattern) => pattern.trim().toLowerCase()).filter((pattern) => pattern !== "");
  if (patterns.includes("*")) return undefined;
  if (patterns.length === 0 && !isLoopbackName(listenHost)) return undefined;
  const loopback = isLoopbackName(listenHost);
  return (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, "");
    if (loopback && isLoopbackName(name)) return true;
    return patterns.some((pattern) => (pattern.startsWith("*.") ? name.endsWith(pattern.slice(1)) : name === pattern));
  };
}

/** Loopback addresses: 127.0.0.0/8, ::1, and 127.0.0.0/8 mapped into IPv6. */
const loopbackAddresses = new BlockList();
loopbackAddresses.addSubnet("127.0.0.0", 8, "ipv4");
loopbackAddresses.addAddress("::1", "ipv6");
loopbackAddresses.addSubnet("::ffff:127.0.0.0", 104, "ipv6");

/** `localhost`, `*.localhost`, or a loopback address (an IPv6 one bracketed or not). */
export function isLoopbackName(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost" || name.endsWith(".localhost")) return true;
  const family = isIP(name);
  return family !== 0 && loopbackAddresses.check(name, family === 4 ? "ipv4" : "ipv6");
}
