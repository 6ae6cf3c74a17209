import * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, TestApp } from "./support/TestApp.js"

const counterLine = (metrics: string, labels: string) =>
  metrics.split("\n").find((line) => line.startsWith(`account_api_http_requests_total{${labels}}`))

/** Prometheus text, which `call` (JSON only) cannot read. */
const metricsText = Effect.flatMap(HttpClient.HttpClient, (client) => client.get("/metrics")).pipe(
  Effect.flatMap((response) => response.text),
  Effect.scoped,
  Effect.orDie
)

layer(TestApp(), { excludeTestServices: true })("request ids and HTTP metrics", (it) => {
  describe("request ids", () => {
    it.effect("every answer carries one, made up when the caller sent none", () =>
      Effect.gen(function*() {
        const first = yield* call("GET", "/healthz")
        const second = yield* call("GET", "/no/such/route")
        expect(first.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
        expect(second.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
        expect(first.headers["x-request-id"]).not.toBe(second.headers["x-request-id"])
      }))

    it.effect("a plain one from the caller is kept, anything else replaced", () =>
      Effect.gen(function*() {
        const kept = yield* call("GET", "/healthz", { headers: { "x-request-id": "trace-1.2:3" } })
        expect(kept.headers["x-request-id"]).toBe("trace-1.2:3")
        const replaced = yield* call("GET", "/healthz", { headers: { "x-request-id": "no spaces allowed" } })
        expect(replaced.headers["x-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
      }))
  })

  describe("GET /metrics", () => {
    it.effect("counts requests by method, route template and status", () =>
      Effect.gen(function*() {
        yield* call("GET", "/auth/me")
        yield* call("GET", "/auth/me")
        yield* call("POST", "/auth/login", { body: {} })
        const metrics = yield* metricsText
        expect(counterLine(metrics, `method="GET",route="/auth/me",status="401"`)).toMatch(/ 2$/)
        expect(counterLine(metrics, `method="POST",route="/auth/login",status="422"`)).toMatch(/ 1$/)
        expect(metrics).toContain(
          `account_api_http_request_duration_seconds_bucket{le="0.001",method="GET",route="/auth/me",status="401"}`
        )
      }))

    it.effect("labels unknown paths as unmatched, never by the raw path", () =>
      Effect.gen(function*() {
        yield* call("GET", "/no/such/route/4f1c2b7e")
        const metrics = yield* metricsText
        expect(counterLine(metrics, `method="GET",route="unmatched",status="404"`)).toBeDefined()
        expect(metrics).not.toContain("4f1c2b7e")
      }))

    it.effect("labels documentation by its path and ignores the query string", () =>
      Effect.gen(function*() {
        yield* call("GET", "/openapi.json?pretty=1")
        const metrics = yield* metricsText
        expect(counterLine(metrics, `method="GET",route="/openapi.json",status="200"`)).toBeDefined()
      }))
  })
})
