import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { UpstreamEngine } from "./UpstreamEngine.js";

/** Seconds: an upstream's answer, from a refusal (milliseconds) to a long stream (minutes). */
const ATTEMPT_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];

/**
 * The upstreams' metrics in the server's registry: attempts by model, endpoint and outcome, their
 * duration, requests in flight and whether each endpoint is in its pool now, and affinity hits (a
 * conversation sent to the endpoint it prefers) against misses. Labels take only the declared
 * model names and endpoint URLs, so no client can grow the number of series.
 */
export function upstreamMetrics(engine: UpstreamEngine): (registry: Registry) => void {
  return (registry) => {
    const attempts = new Counter({
      name: "modelhost_upstream_requests_total",
      help: 'Requests sent to upstream endpoints, by model, endpoint and outcome: "ok", "refused" (a 4xx the client caused) or "error" (the endpoint failed; retried elsewhere before the first chunk).',
      labelNames: ["model", "endpoint", "outcome"] as const,
      registers: [registry],
    });
    const seconds = new Histogram({
      name: "modelhost_upstream_request_duration_seconds",
      help: "From sending a request to an upstream endpoint to its end (a stream's last chunk), by model and endpoint.",
      labelNames: ["model", "endpoint"] as const,
      buckets: ATTEMPT_BUCKETS,
      registers: [registry],
    });
    const affinity = new Counter({
      name: "modelhost_upstream_affinity_total",
      help: 'Conversations sent upstream, by model and whether they went to the endpoint their hash prefers ("hit") or, that one being down, full or over its bounded load, to another ("miss").',
      labelNames: ["model", "result"] as const,
      registers: [registry],
    });
    const endpoints = () => [...engine.pools].flatMap(([model, pool]) => pool.endpoints.map((endpoint) => ({ model, endpoint })));
    new Gauge({
      name: "modelhost_upstream_in_flight",
      help: "Requests in flight on each upstream endpoint.",
      labelNames: ["model", "endpoint"] as const,
      registers: [registry],
      collect() {
        for (const { model, endpoint } of endpoints()) this.set({ model, endpoint: endpoint.spec.url }, endpoint.inFlight);
      },
    });
    new Gauge({
      name: "modelhost_upstream_endpoint_up",
      help: "1 while an upstream endpoint is in its pool, 0 while it is out after failures.",
      labelNames: ["model", "endpoint"] as const,
      registers: [registry],
      collect() {
        for (const { model, endpoint } of endpoints()) this.set({ model, endpoint: endpoint.spec.url }, endpoint.down ? 0 : 1);
      },
    });
    engine.onAttempt = (attempt) => {
      attempts.inc({ model: attempt.model, endpoint: attempt.endpoint, outcome: attempt.outcome });
      seconds.observe({ model: attempt.model, endpoint: attempt.endpoint }, attempt.seconds);
      if (attempt.preferred !== undefined) affinity.inc({ model: attempt.model, result: attempt.preferred ? "hit" : "miss" });
    };
  };
}
