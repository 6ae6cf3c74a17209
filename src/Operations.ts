import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Metrics } from "./Metrics.js"
import { Redis } from "./Redis.js"
import { SettlementMetricsReader } from "./Settlement/Metrics.js"
import { ping } from "./Sql.js"

const CHECK_TIMEOUT = "1 second"

const probe = <A, E, R>(check: Effect.Effect<A, E, R>) =>
  check.pipe(
    Effect.timeout(CHECK_TIMEOUT),
    Effect.as("ok" as const),
    Effect.catchAllCause(() => Effect.succeed("down" as const))
  )

/** What orchestrators and scrapers ask of a process (D9): can it serve, and its metrics. */
export class Operations extends Effect.Service<Operations>()("Operations", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const redis = yield* Redis
    const metrics = yield* Metrics
    const settlement = yield* SettlementMetricsReader

    /** Whether each store answers within a second. */
    const readiness = Effect.all({
      postgres: probe(ping(sql)),
      redis: probe(Effect.tryPromise(() => redis.client.ping()))
    }, { concurrency: "unbounded" })

    /** This process's metrics and the live settlement workers' counters, as one Prometheus exposition. */
    const exposition = Effect.map(
      Effect.all([metrics.render, settlement.workerSnapshots]),
      (texts) => texts.join("\n")
    )

    return { readiness, exposition, contentType: metrics.contentType } as const
  }),
  dependencies: [Redis.Default, SettlementMetricsReader.Default]
}) {}
