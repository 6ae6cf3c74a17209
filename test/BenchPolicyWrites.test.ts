import * as HttpServer from "@effect/platform/HttpServer"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { policyWriteRunner } from "../bench/suites/policyWrites.js"
import { signedInUser, TestApp } from "./support/TestApp.js"

const CONNECTIONS = 4

const baseUrl = Effect.map(
  HttpServer.HttpServer,
  (server) => `http://127.0.0.1:${server.address._tag === "TcpAddress" ? server.address.port : 0}`
)

layer(TestApp(), { excludeTestServices: true, timeout: "60 seconds" })("the bench's policy-write round", (it) => {
  describe("every write carries the version the service last gave its account", () => {
    it.effect(
      "rounds after rounds cut off mid-write, on connections re-opened after lost answers, get no 409",
      () =>
        Effect.gen(function*() {
          const tokens = yield* Effect.forEach(
            Array.from({ length: CONNECTIONS }),
            () => Effect.map(signedInUser(), (user) => user.token)
          )
          const runner = policyWriteRunner(yield* baseUrl, tokens)
          // autocannon re-opens every connection after three answers, dropping the third unread; and
          // each round ends with a write in flight on each connection that may land after it.
          for (let round = 1; round <= 3; round++) {
            const figures = yield* Effect.promise(() =>
              runner.round({ connections: CONNECTIONS, durationSeconds: 1, reconnectEvery: 3 })
            )
            expect(figures.requests, `round ${round}`).toBeGreaterThan(0)
          }
        }),
      60_000
    )
  })
})
