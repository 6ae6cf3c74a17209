import { Layer } from "effect"
import { BooksDrift, BooksDriftGaugesLive } from "../Books/Drift.js"
import { metricsListener } from "../Metrics/Listener.js"

/**
 * The settlement worker's own metrics at `GET /metrics` on `WORKER_METRICS_PORT`: its process
 * (`process_*`, `nodejs_*`, under prom-client's standard names) and the books drift check's
 * figure (D19), the same on every worker. Settlement counters are not here: they are fleet totals
 * on the API's `/metrics`, and two sources of one counter would count it twice.
 */
export const WorkerMetricsListenerLive = Layer.merge(
  metricsListener("worker", (config) => config.settlement.metricsPort),
  BooksDriftGaugesLive.pipe(Layer.provide(BooksDrift.Default))
)
