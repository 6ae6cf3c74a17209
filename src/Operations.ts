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

/**
 * What `/readyz` checks, as a gauge read at each scrape, so an alert rule can watch
 * readiness without a prober (D18).
 */
const dependencyGauge = (checks: Readonly<Record<string, "ok" | "down">>) =>
  [
    "# HELP account_api_dependency_up 1 when the dependency answered within a second at this scrape (what /readyz checks), else 0.",
    "# TYPE account_api_dependency_up gauge",
    ...Object.entries(checks).map(([name, status]) =>
      `account_api_dependency_up{dependency="${name}"} ${status === "ok" ? 1 : 0}`
    )
  ].join("\n") + "\n"

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

    /** This process's metrics, the fleet's settlement counters and readiness, as one Prometheus exposition. */
    const exposition = Effect.map(
      Effect.all([metrics.render, settlement.workerSnapshots, Effect.map(readiness, dependencyGauge)], {
        concurrency: "unbounded"
      }),
      (texts) => texts.join("\n")
    )

    return { readiness, exposition, contentType: metrics.contentType } as const
  }),
  dependencies: [Redis.Default, SettlementMetricsReader.Default]
}) {}
