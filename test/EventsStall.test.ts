import * as HttpServer from "@effect/platform/HttpServer"
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { slowGet } from "./support/rawHttp.js"
import { signedInUser, TestApp } from "./support/TestApp.js"

/**
 * The live stream (D17) against a reader that stops reading: cut off once nothing moved for two
 * heartbeats, as a stalled export is (issue 22), while a quiet stream read by a live client is
 * kept open by its comment lines.
 */

const HEARTBEAT_MS = 400
const STREAM = "/developer/account/events/stream"

const serverPort = Effect.map(
  HttpServer.HttpServer,
  (server) => server.address._tag === "TcpAddress" ? server.address.port : 0
)

/** Some 10 MB of events for the account, written straight into the log (as a busy month would have). */
const manyEvents = (accountId: string, count: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.gen(function*() {
      yield* sql`INSERT INTO account_event_heads (account_kind, account_id, last_position)
                 VALUES ('user', ${accountId}, ${count})`
      yield* sql`INSERT INTO account_events (account_kind, account_id, position, type, data)
                 SELECT 'user', ${accountId}, n, 'wallet.depleted',
                   json_build_object('padding', repeat('x', 2000))
                 FROM generate_series(1, ${count}) AS n`
    })).pipe(Effect.orDie)

layer(TestApp({ EVENTS_HEARTBEAT_MS: String(HEARTBEAT_MS) }), { excludeTestServices: true, timeout: "60 seconds" })(
  "the event stream and its readers",
  (it) => {
    describe("stalled and quiet readers", () => {
      it.effect("a reader that stops reading is cut off once nothing moved for two heartbeats", () =>
        Effect.gen(function*() {
          const port = yield* serverPort
          const user = yield* signedInUser()
          const reader = slowGet(port, STREAM, { token: user.token, bytesPerSecond: 0 })
          yield* Effect.gen(function*() {
            expect(yield* Effect.promise(() => reader.status)).toBe(200)
            yield* manyEvents(user.id, 5000)
            yield* Effect.sleep(`${HEARTBEAT_MS * 2 + 2000} millis`)
            reader.resume()
            const closed = yield* Effect.promise(() => reader.closed).pipe(Effect.timeout("20 seconds"))
            expect(closed.aborted).toBe(true)
            // It was cut where the server gave up: far from the whole log.
            expect(reader.received().split("\nevent: ").length - 1).toBeLessThan(5000)
          }).pipe(Effect.ensuring(Effect.sync(reader.destroy)))
        }))

      it.effect("a quiet stream read by a live client stays open on its comment lines", () =>
        Effect.gen(function*() {
          const port = yield* serverPort
          const user = yield* signedInUser()
          const reader = slowGet(port, STREAM, { token: user.token, bytesPerSecond: 0 })
          yield* Effect.gen(function*() {
            expect(yield* Effect.promise(() => reader.status)).toBe(200)
            reader.resume()
            yield* Effect.sleep(`${HEARTBEAT_MS * 6} millis`)
            expect(reader.received().split(": keep-alive").length - 1).toBeGreaterThanOrEqual(3)
            const open = yield* Effect.promise(() => reader.closed).pipe(Effect.timeout("10 millis"), Effect.option)
            expect(open._tag).toBe("None")
          }).pipe(Effect.ensuring(Effect.sync(reader.destroy)))
        }))
    })
  }
)
