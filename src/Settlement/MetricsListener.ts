import { metricsListener } from "../Metrics/Listener.js"

/**
 * The settlement worker's own process metrics (`process_*`, `nodejs_*`, under prom-client's
 * standard names) at `GET /metrics` on `WORKER_METRICS_PORT`. Settlement counters are not here:
 * they are fleet totals on the API's `/metrics`, and two sources of one counter would count it twice.
 */
export const WorkerMetricsListenerLive = metricsListener("worker", (config) => config.settlement.metricsPort)
