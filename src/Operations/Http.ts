import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Unavailable } from "../Domain/Errors.js"
import { Health } from "../Health.js"
import { Metrics } from "../Metrics.js"
import { SettlementMetricsReader } from "../Settlement/Metrics.js"

export const OperationsHttpLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.gen(function*() {
    const health = yield* Health
    const metrics = yield* Metrics
    const settlement = yield* SettlementMetricsReader
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(health.check, (checks) => {
          const down = Object.entries(checks).filter(([, status]) => status === "down").map(([name]) => name)
          return down.length === 0
            ? Effect.succeed({ status: "ready" as const, checks })
            : Effect.fail(new Unavailable({ detail: `Not ready: ${down.join(" and ")} down.`, retry_after_seconds: 1 }))
        }))
      // Prometheus wants its own content type (with the format version), so the response is built here.
      .handle("metrics", () =>
        Effect.map(
          Effect.all([metrics.render, settlement.workerSnapshots]),
          (texts) => HttpServerResponse.text(texts.join("\n"), { contentType: metrics.contentType })
        ))
  })).pipe(Layer.provide([Health.Default, SettlementMetricsReader.Default]))
