import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Unavailable } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"

export class DependencyStatus extends Schema.Class<DependencyStatus>("DependencyStatus")({
  postgres: Schema.Literal("ok", "down"),
  redis: Schema.Literal("ok", "down")
}) {}

/** Liveness and readiness for orchestrators (D9); no authentication. */
export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready"), checks: DependencyStatus }))
      .addError(problem(Unavailable))
  )
{}
