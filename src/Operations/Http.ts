import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Unavailable } from "../Domain/Errors.js"
import { Operations } from "../Operations.js"
import { DependencyStatus } from "./Api.js"

export const OperationsHttpLive = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.gen(function*() {
    const operations = yield* Operations
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(operations.readiness, (checks) => {
          const down = Object.entries(checks).filter(([, status]) => status === "down").map(([name]) => name)
          return down.length === 0
            ? Effect.succeed({ status: "ready" as const, checks: new DependencyStatus(checks) })
            : Effect.fail(new Unavailable({ detail: `Not ready: ${down.join(" and ")} down.`, retry_after_seconds: 1 }))
        }))
      // Prometheus wants its own content type (with the format version), so the response is built here.
      .handle("metrics", () =>
        Effect.map(operations.exposition, (text) =>
          HttpServerResponse.text(text, { contentType: operations.contentType })))
  })).pipe(Layer.provide(Operations.Default))
