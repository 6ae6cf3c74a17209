import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Option, Redacted } from "effect"
import Pg from "pg"
import { AppConfig } from "../src/Config.js"
import { DatabaseLive } from "../src/Sql.js"
import { waitFor } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

/** Six statements at once, each on the connection it is given: the server processes that answered. */
const backendsOfSixAtOnce = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* Effect.all(
    Array.from({ length: 6 }, () => sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid, pg_sleep(0.2)`),
    { concurrency: "unbounded" }
  )
  return new Set(rows.map(([row]) => row?.pid))
}).pipe(Effect.orDie)

/** A connection of its own to the service's database, outside its pool: the administrator's. */
const administrator = Effect.acquireRelease(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const client = new Pg.Client({ connectionString: Redacted.value(config.databaseUrl) })
    yield* Effect.promise(() => client.connect())
    return client
  }),
  (client) => Effect.promise(() => client.end())
)

describe("DATABASE_POOL_SIZE (D14)", () => {
  layer(DatabaseLive.pipe(Layer.provideMerge(TestConfig({ DATABASE_POOL_SIZE: "2" }))))("set to 2", (it) => {
    it.effect("a process holds at most that many connections: six statements at once share two", () =>
      Effect.gen(function*() {
        expect((yield* backendsOfSixAtOnce).size).toBe(2)
      }))
  })

  layer(DatabaseLive.pipe(Layer.provideMerge(TestConfig())))("unset", (it) => {
    it.effect("a process holds up to 20: six statements at once each have their own", () =>
      Effect.gen(function*() {
        expect((yield* backendsOfSixAtOnce).size).toBe(6)
      }))
  })
})

describe("a connection the server ended", () => {
  // One connection, so the statement waiting for it is handed the terminated backend's, or a new one.
  layer(DatabaseLive.pipe(Layer.provideMerge(TestConfig({ DATABASE_POOL_SIZE: "1" }))), { excludeTestServices: true })(
    "never goes back to the pool",
    (it) => {
      it.scoped("a backend terminated mid-statement fails its statement, and the next runs on a new connection", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const admin = yield* administrator
          const [first] = yield* sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
          const pid = first?.pid
          const sleeping = yield* Effect.fork(Effect.either(sql`SELECT pg_sleep(30)`))
          const waiting = yield* Effect.fork(
            Effect.either(sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`)
          )
          // Until the one connection runs the sleep: the second statement waits for it in the pool.
          yield* waitFor(
            "the one connection runs the sleep",
            Effect.promise(() =>
              admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep%'", [pid])
            ).pipe(Effect.map((result) => result.rowCount === 1 ? Option.some(result) : Option.none())),
            { limit: "10 seconds", every: "20 millis" }
          )
          yield* Effect.promise(() => admin.query("SELECT pg_terminate_backend($1)", [pid]))
          expect(Either.isLeft(yield* Fiber.join(sleeping))).toBe(true)
          const after = yield* Fiber.join(waiting)
          expect(Either.getOrThrow(after)[0]?.pid).not.toBe(pid)
        }).pipe(Effect.orDie))
    }
  )
})

describe("a statement interrupted while it runs", () => {
  // One connection, so every interrupted statement runs on the same one.
  layer(DatabaseLive.pipe(Layer.provideMerge(TestConfig({ DATABASE_POOL_SIZE: "1" }))), { excludeTestServices: true })(
    "waits for its end without leaving a listener on the connection",
    (it) => {
      it.effect("many interruptions on one connection raise no MaxListenersExceededWarning", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const warnings: Array<string> = []
          const onWarning = (warning: Error) => warnings.push(warning.name)
          process.on("warning", onWarning)
          let interrupted = 0
          yield* Effect.gen(function*() {
            for (let i = 0; i < 25; i++) {
              // Interrupted while it runs: the interruption waits for the statement's end on that connection.
              const outcome = yield* sql`SELECT pg_sleep(0.1)`.pipe(Effect.timeout("10 millis"), Effect.either)
              if (Either.isLeft(outcome)) interrupted++
            }
            // Node emits the warning on a later tick.
            yield* Effect.sleep("50 millis")
          }).pipe(Effect.ensuring(Effect.sync(() => process.off("warning", onWarning))))
          // Past the ten listeners Node allows an emitter, however late a loaded machine's timers fire.
          expect(interrupted).toBeGreaterThan(15)
          expect(warnings.filter((name) => name === "MaxListenersExceededWarning")).toEqual([])
          // The connection is still the pool's one and serves the next statement.
          expect(yield* sql<{ readonly one: number }>`SELECT 1 AS one`).toEqual([{ one: 1 }])
        }).pipe(Effect.orDie))
    }
  )
})
