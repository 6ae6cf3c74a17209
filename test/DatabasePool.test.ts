import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { DatabaseLive } from "../src/Sql.js"
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
