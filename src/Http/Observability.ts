import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Context, Effect, FiberRef, HashMap, LogLevel } from "effect"
import { randomUUID } from "node:crypto"
import { Api } from "../Api.js"
import type { Metrics } from "../Metrics.js"

interface RouteTemplate {
  readonly method: string
  readonly template: string
  readonly pattern: RegExp
}

/**
 * Route templates from the contract, so metrics label
 * `/…/repositories/:repository_id/policy`, never a raw id. Paths without
 * parameters are found by one map lookup; only the others need a pattern.
 */
const { exactRoutes, patternRoutes } = (() => {
  const exact = new Map<string, string>()
  const patterns: Array<RouteTemplate> = []
  HttpApi.reflect(Api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (!endpoint.path.includes(":")) {
        exact.set(`${endpoint.method} ${endpoint.path}`, endpoint.path)
        return
      }
      const source = endpoint.path.split("/").map((part) =>
        part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      )
      patterns.push({ method: endpoint.method, template: endpoint.path, pattern: new RegExp(`^${source.join("/")}$`) })
    }
  })
  return { exactRoutes: exact, patternRoutes: patterns }
})()

/** Routes served outside the contract (documentation, dashboard, console). */
const extraRoutes = ["/openapi.json", "/docs", "/admin/queues", "/console"]

export const routeOf = (method: string, url: string): string => {
  const query = url.indexOf("?")
  const path = query === -1 ? url : url.slice(0, query)
  const exact = exactRoutes.get(`${method} ${path}`)
  if (exact !== undefined) return exact
  const route = patternRoutes.find((candidate) => candidate.method === method && candidate.pattern.test(path))
  if (route !== undefined) return route.template
  return extraRoutes.find((prefix) => path === prefix || path.startsWith(`${prefix}/`)) ?? "unmatched"
}

const PLAIN_REQUEST_ID = /^[\w.:-]{1,128}$/

/** A caller's request id is kept when it is plain, so a trace crosses services; otherwise one is made. */
const requestIdOf = (request: HttpServerRequest.HttpServerRequest) => {
  const given = request.headers["x-request-id"]
  return given !== undefined && PLAIN_REQUEST_ID.test(given) ? given : randomUUID()
}

/**
 * One JSON log line and one metrics sample per request, the request id on
 * every log line written while it runs and on the response (D9). Headers and
 * bodies are never logged: they carry tokens and passwords.
 *
 * It runs on every request, so it is written for that: one step to read the
 * request and the log level, the access line built only when info is logged,
 * metrics through cached label sets.
 */
export const observability = (metrics: Metrics) =>
  HttpMiddleware.make((app) =>
    Effect.withFiberRuntime<HttpServerResponse.HttpServerResponse, never, Effect.Effect.Context<typeof app>>(
      (fiber) => {
        // The server provides the request to every fiber it runs an app in.
        const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
        const logsRequests = LogLevel.greaterThanEqual(
          LogLevel.Info,
          fiber.getFiberRef(FiberRef.currentMinimumLogLevel)
        )
        const requestId = requestIdOf(request)
        const started = performance.now()
        const answered = (response: HttpServerResponse.HttpServerResponse) => {
          const milliseconds = performance.now() - started
          const route = routeOf(request.method, request.url)
          metrics.recordHttp(request.method, route, response.status, milliseconds / 1000)
          if (!logsRequests) return Effect.succeed(response)
          // The fiber ends with this line, so its annotations are set, not scoped around it.
          const annotated = FiberRef.update(
            FiberRef.currentLogAnnotations,
            (annotations) =>
              HashMap.mutate(annotations, (map) => {
                HashMap.set(map, "method", request.method)
                HashMap.set(map, "route", route)
                HashMap.set(map, "status", response.status)
                HashMap.set(map, "duration_ms", Math.round(milliseconds * 1e3) / 1e3)
              })
          )
          return Effect.as(Effect.zipRight(annotated, Effect.logInfo("request")), response)
        }
        // The server runs each request in a fiber of its own, so the id is set for the rest of that
        // fiber's life: cheaper than around `app`, which would save and restore it.
        const tagLogs = FiberRef.update(
          FiberRef.currentLogAnnotations,
          HashMap.set<string, unknown>("request_id", requestId)
        )
        // The response is written inside `app`; a header added to what it returns would arrive too late.
        const tagResponse = HttpApp.appendPreResponseHandler((_, response) =>
          Effect.succeed(HttpServerResponse.setHeader(response, "x-request-id", requestId))
        )
        return Effect.zipRight(tagLogs, tagResponse).pipe(
          Effect.zipRight(app),
          // A failure arrives here after the server has answered it; the status it sent is recovered
          // for the metrics. A client that went away (499) is not a failure of ours to log.
          Effect.catchAllCause((cause) =>
            Effect.flatMap(
              HttpServerError.causeResponse(cause),
              ([response, rest]) =>
                Cause.isEmpty(rest) || Cause.isInterruptedOnly(rest)
                  ? Effect.succeed(response)
                  : Effect.as(Effect.logError("Request failed", rest), response)
            )
          ),
          Effect.flatMap(answered)
        )
      }
    )
  )
