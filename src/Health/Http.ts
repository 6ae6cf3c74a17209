import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Health } from "../Health.js"
import { Unavailable } from "../Domain/Errors.js"

export const HealthHttpLive = HttpApiBuilder.group(Api, "health", (handlers) =>
  Effect.gen(function*() {
    const health = yield* Health
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        Effect.flatMap(health.check, (checks) =>
          checks.postgres === "ok" && checks.redis === "ok"
            ? Effect.succeed({ status: "ready" as const, checks })
            : Effect.fail(
              new Unavailable({
                detail: `Not ready: ${Object.entries(checks).filter(([, s]) => s === "down").map(([n]) => n).join(" and ")} down.`,
                retry_after_seconds: 1
              })
            )))
  })).pipe(Layer.provide(Health.Default))
