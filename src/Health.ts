import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { DependencyStatus } from "./Operations/Api.js"
import { Redis } from "./Redis.js"

const CHECK_TIMEOUT = "1 second"

const probe = <A, E, R>(check: Effect.Effect<A, E, R>) =>
  check.pipe(
    Effect.timeout(CHECK_TIMEOUT),
    Effect.as("ok" as const),
    Effect.catchAllCause(() => Effect.succeed("down" as const))
  )

/** Whether the process can serve: both stores answer within a second. */
export class Health extends Effect.Service<Health>()("Health", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const redis = yield* Redis
    const check = Effect.all({
      postgres: probe(sql`SELECT 1`),
      redis: probe(Effect.tryPromise(() => redis.client.ping()))
    }, { concurrency: "unbounded" }).pipe(Effect.map((checks) => new DependencyStatus(checks)))
    return { check } as const
  }),
  dependencies: [Redis.Default]
}) {}
