import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Unavailable } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"

export class DependencyStatus extends Schema.Class<DependencyStatus>("DependencyStatus")({
  postgres: Schema.Literal("ok", "down"),
  redis: Schema.Literal("ok", "down")
}) {}

/** Liveness, readiness and metrics for orchestrators and scrapers (D9); no authentication. */
export class OperationsApi extends HttpApiGroup.make("operations")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz")
      .annotate(OpenApi.Summary, "Liveness")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ok") }))
      .annotate(OpenApi.Description, "200 while the process runs.")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .annotate(OpenApi.Summary, "Readiness")
      .addSuccess(Schema.Struct({ status: Schema.Literal("ready"), checks: DependencyStatus }))
      .addError(problem(Unavailable))
      .annotate(OpenApi.Description, "200 when PostgreSQL and Redis answer within a second, else 503.")
  )
  .add(
    HttpApiEndpoint.get("metrics", "/metrics")
      .annotate(OpenApi.Summary, "Prometheus metrics")
      .addSuccess(Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/plain" })))
      .annotate(OpenApi.Description, "Prometheus text exposition.")
  )
  .annotate(OpenApi.Title, "Operations")
{}
