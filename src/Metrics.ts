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
    // prom-client's own names (process_cpu_seconds_total, nodejs_heap_size_used_bytes, …), so stock dashboards work (D9).
    collectDefaultMetrics({ register: registry })
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
    // prom-client hashes a label object on every call; each label set's instruments are looked up once.
    // Bounded: methods Node accepts, route templates and statuses.
    const byLabels = new Map<
      string,
      { readonly requests: Counter.Internal; readonly duration: Histogram.Internal<string> }
    >()
    const instrumentsFor = (method: string, route: string, status: number) => {
      const key = `${method} ${route} ${status}`
      let instruments = byLabels.get(key)
      if (instruments === undefined) {
        instruments = {
          requests: httpRequests.labels(method, route, String(status)),
          duration: httpDuration.labels(method, route, String(status))
        }
        byLabels.set(key, instruments)
      }
      return instruments
    }
    return {
      registry,
      recordHttp: (method: string, route: string, status: number, seconds: number) => {
        const instruments = instrumentsFor(method, route, status)
        instruments.requests.inc()
        instruments.duration.observe(seconds)
      },
      render: Effect.promise(() => registry.metrics()),
      contentType: registry.contentType
    } as const
  }
}) {}
