import { Effect } from "effect"
import { collectDefaultMetrics, Counter, Histogram, Registry } from "prom-client"

/** Every metric name starts with this (D9). No label ever carries an account, user or session id. */
export const METRIC_PREFIX = "account_api_"

/**
 * The process's Prometheus registry and the HTTP instruments. Feature code adds
 * its own instruments to `registry`; `/metrics` renders them all.
 */
export class Metrics extends Effect.Service<Metrics>()("Metrics", {
  sync: () => {
    const registry = new Registry()
    collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX })
    const httpRequests = new Counter({
      name: `${METRIC_PREFIX}http_requests_total`,
      help: "HTTP requests answered, by method, route template and status.",
      labelNames: ["method", "route", "status"] as const,
      registers: [registry]
    })
    const httpDuration = new Histogram({
      name: `${METRIC_PREFIX}http_request_duration_seconds`,
      help: "Time to answer an HTTP request, by method, route template and status.",
      labelNames: ["method", "route", "status"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry]
    })
    return {
      registry,
      recordHttp: (labels: { method: string; route: string; status: string }, seconds: number) => {
        httpRequests.inc(labels)
        httpDuration.observe(labels, seconds)
      },
      render: Effect.promise(() => registry.metrics()),
      contentType: registry.contentType
    } as const
  }
}) {}
