import { HttpApi, HttpApp, HttpMiddleware, HttpServerError, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, HashSet } from "effect"
import { randomUUID } from "node:crypto"
import { Api } from "../Api.js"
import { Metrics } from "../Metrics.js"

interface RouteTemplate {
  readonly method: string
  readonly template: string
  readonly pattern: RegExp
}

/** Route templates from the contract, so metrics label `/…/repositories/:repository_id/policy`, never a raw id. */
const routeTemplates: ReadonlyArray<RouteTemplate> = (() => {
  const routes: Array<RouteTemplate> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const source = endpoint.path.split("/").map((part) => part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
      routes.push({ method: endpoint.method, template: endpoint.path, pattern: new RegExp(`^${source.join("/")}$`) })
    }
  })
  return routes
})()

/** Routes served outside the contract (documentation, dashboard). */
const extraRoutes = ["/openapi.json", "/docs", "/admin/queues"]

const routeOf = (method: string, url: string): string => {
  const path = url.split("?")[0] ?? url
  const route = routeTemplates.find((candidate) => candidate.method === method && candidate.pattern.test(path))
  if (route !== undefined) return route.template
  return extraRoutes.find((prefix) => path === prefix || path.startsWith(`${prefix}/`)) ?? "unmatched"
}

/**
 * The client went away before the answer (a browser leaving a page while the
 * queue dashboard polls): nothing failed here, so it is a 499, not an error.
 */
const isClientAbort = (cause: Cause.Cause<unknown>) =>
  HashSet.has(Cause.interruptors(cause), HttpServerError.clientAbortFiberId)

/** A caller's request id is kept when it is plain, so a trace crosses services; otherwise one is made. */
const requestIdOf = (request: HttpServerRequest.HttpServerRequest) => {
  const given = request.headers["x-request-id"]
  return given !== undefined && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID()
}

/**
 * One JSON log line and one metrics sample per request, and the request id on
 * every log line written while it runs (D9). Headers and bodies are never
 * logged: they carry tokens and passwords.
 */
export const observability = HttpMiddleware.make((app) =>
    Effect.gen(function*() {
      const metrics = yield* Metrics
      const request = yield* HttpServerRequest.HttpServerRequest
      const requestId = requestIdOf(request)
      const started = process.hrtime.bigint()
      // The app writes its response before this middleware resumes, so the header goes on as it is sent.
      yield* HttpApp.appendPreResponseHandler((_, response) =>
        Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", requestId))
      )
      const response = yield* app.pipe(
        Effect.annotateLogs("request_id", requestId),
        Effect.catchAllCause((cause) =>
          isClientAbort(cause)
            ? Effect.succeed(HttpServerResponse.empty({ status: 499 }))
            : Effect.as(Effect.logError("Unanswered request", cause), HttpServerResponse.empty({ status: 500 }))
        )
      )
      const seconds = Number(process.hrtime.bigint() - started) / 1e9
      const route = routeOf(request.method, request.url)
      const status = String(response.status)
      metrics.recordHttp({ method: request.method, route, status }, seconds)
      yield* Effect.logInfo("request").pipe(
        Effect.annotateLogs({
          request_id: requestId,
          method: request.method,
          route,
          status: response.status,
          duration_ms: Math.round(seconds * 1e6) / 1e3
        })
      )
      return response
    })
  )
