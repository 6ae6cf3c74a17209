import { Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import { AppConfig } from "../Config.js"
import { Metrics } from "../Metrics.js"

/**
 * A queue process's own metrics at `GET /metrics` on the port `portOf` reads from the settings,
 * for Prometheus to scrape each process; unset, nothing listens. Bare `node:http`: a worker loads
 * no HTTP framework. `program` names it in the log and in a start-up failure. It serves the
 * registry (`Metrics`) the program provides, which its features' instruments are on too.
 */
export const metricsListener = (program: string, portOf: (config: AppConfig) => Option.Option<number>) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const found = portOf(yield* AppConfig)
      if (Option.isNone(found)) return
      const port = found.value
      // The process's registry: its default metrics and what its features add.
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
          server.once(
            "error",
            (error) => resume(Effect.dieMessage(`${program} metrics port ${port}: ${error.message}`))
          )
          server.listen(port, () => resume(Effect.void))
        }),
        () =>
          Effect.async<void>((resume) => {
            server.close(() => resume(Effect.void))
            server.closeAllConnections()
          })
      )
      yield* Effect.logInfo(`${program} metrics on port ${port}`).pipe(Effect.annotateLogs("port", port))
    })
  )
