import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { adminQuery } from "./support/databases.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"

/**
 * The database going away under a running server: every request that needs it
 * answers 503 `unavailable` with Retry-After, and authentication fails closed
 * (503, never a pass and never a 401 that would sign a client out) (D1, D2, D6).
 */
const databaseName = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql<{ name: string }>`SELECT current_database() AS name`
).pipe(
  Effect.map((rows) => rows[0]?.name ?? ""),
  Effect.orDie
)

/** Refuses new connections to the file's database and ends the open ones, until `restore`. */
const cutDatabase = (name: string) =>
  Effect.promise(async () => {
    await adminQuery(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS false`)
    await adminQuery(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}' AND pid <> pg_backend_pid()`
    )
  })

const restore = (name: string) =>
  Effect.promise(() => adminQuery(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS true`))

layer(TestApp(), { excludeTestServices: true })("database outage", (it) => {
  describe("with PostgreSQL unreachable", () => {
    it.effect("authenticated reads are 503 unavailable with Retry-After, and recover when it is back", () =>
      Effect.gen(function*() {
        const user = yield* signedInUser()
        const name = yield* databaseName
        expect((yield* call("GET", "/developer/account/wallet", { token: user.token })).status).toBe(200)
        const [during, budget, ready] = yield* Effect.scoped(Effect.gen(function*() {
          yield* Effect.acquireRelease(cutDatabase(name), () => restore(name))
          return [
            yield* call("GET", "/developer/account/wallet", { token: user.token }),
            yield* call("PUT", "/developer/account/wallet", {
              token: user.token,
              body: { budget_usd: "10", idempotency_key: "outage-1" }
            }),
            yield* call("GET", "/readyz")
          ] as const
        }))
        expect(during.status).toBe(503)
        expect(during.body).toMatchObject({ type: "about:blank", status: 503, code: "unavailable" })
        expect(Number(during.headers["retry-after"])).toBeGreaterThan(0)
        expect(budget.status).toBe(503)
        expect(ready.status).toBe(503)
        expect(ready.body).toMatchObject({ code: "unavailable", detail: expect.stringContaining("postgres") })
        // Nothing was applied: the same key now applies for the first time.
        const after = yield* call("PUT", "/developer/account/wallet", {
          token: user.token,
          body: { budget_usd: "10", idempotency_key: "outage-1" }
        })
        expect(after.status).toBe(200)
        expect(after.headers["idempotent-replayed"]).toBeUndefined()
        expect(after.body).toMatchObject({ budget_usd: "10.000000", version: 1 })
      }))
  })
})
