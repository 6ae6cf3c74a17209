import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { AppConfig } from "../Config.js"
import { Metrics } from "../Metrics.js"

/**
 * The worker's own process metrics (`process_*`, `nodejs_*`, under prom-client's
 * standard names) at `GET /metrics` on `WORKER_METRICS_PORT`, for Prometheus to
 * scrape each worker; unset, nothing listens. Settlement counters are not here:
 * they are fleet totals on the API's `/metrics`, and two sources of one counter
 * would count it twice.
 */
export const WorkerMetricsListenerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isNone(config.settlement.metricsPort)) return
    const port = config.settlement.metricsPort.value
    // The process's registry: its default metrics and what the worker's features add (webhook deliveries).
    const { registry } = yield* Metrics
    const server = createServer((request, response) => {
      if (request.method !== "GET" || request.url?.split("?")[0] !== "/metrics") {
        response.writeHead(404, { "content-type": "text/plain" }).end("not found\n")
        return
      }
      registry.metrics().then(
        (text) => response.writeHead(200, { "content-type": registry.contentType }).end(text),
        () => response.writeHead(500, { "content-type": "text/plain" }).end("metrics unavailable\n")
      )
    })
    yield* Effect.acquireRelease(
      Effect.async<void>((resume) => {
        // A port in use is a start-up failure, said in one line (D9).
        server.once("error", (error) => resume(Effect.dieMessage(`worker metrics port ${port}: ${error.message}`)))
        server.listen(port, () => resume(Effect.void))
      }),
      () =>
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
    yield* Effect.logInfo(`worker metrics on port ${port}`).pipe(Effect.annotateLogs("port", port))
  })
).pipe(
  // One registry per program: layers are shared by reference, so the worker's other features that
  // are given `Metrics.Default` (webhook deliveries) register on this same one.
  Layer.provide(Metrics.Default)
)
