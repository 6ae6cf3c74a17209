import { describe, expect, layer } from "@effect/vitest"
import { Effect, HashMap, Layer, Logger } from "effect"
import { call, TestApp } from "./support/TestApp.js"

interface Line {
  readonly message: unknown
  readonly level: string
  readonly annotations: Readonly<Record<string, unknown>>
}

const lines: Array<Line> = []

/** Keeps every line the server logs, as the JSON logger would see it. */
const Capture = Logger.replace(
  Logger.defaultLogger,
  Logger.make(({ annotations, logLevel, message }) => {
    lines.push({
      message: Array.isArray(message) && message.length === 1 ? message[0] : message,
      level: logLevel.label,
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  })
)

layer(TestApp().pipe(Layer.provide(Capture)), { excludeTestServices: true })("request logs (D9)", (it) => {
  describe("the access line", () => {
    it.effect("carries the request id, method, route template, status and duration", () =>
      Effect.gen(function*() {
        const reply = yield* call("GET", "/auth/me", { headers: { "x-request-id": "req-42" } })
        expect(reply.status).toBe(401)
        const line = lines.find((candidate) => candidate.annotations.request_id === "req-42")
        expect(line).toMatchObject({
          message: "request",
          level: "INFO",
          annotations: { request_id: "req-42", method: "GET", route: "/auth/me", status: 401 }
        })
        expect(line?.annotations.duration_ms).toEqual(expect.any(Number))
      }))

    it.effect("never carries headers or bodies", () =>
      Effect.gen(function*() {
        yield* call("POST", "/auth/login", {
          headers: { "x-request-id": "req-43" },
          body: { email: "someone@example.com", password: "a secret passphrase" }
        })
        const logged = JSON.stringify(lines.filter((line) => line.annotations.request_id === "req-43"))
        expect(logged).toContain("req-43")
        expect(logged).not.toContain("a secret passphrase")
        expect(logged).not.toContain("someone@example.com")
      }))
  })
})
