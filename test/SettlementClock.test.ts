import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Clock, type Duration, Effect, Layer, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import { Settlement } from "../src/Settlement.js"
import type { SettlementJob } from "../src/Settlement/Jobs.js"
import { saveLimits } from "./support/spendControls.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * Every bound a batch judges is judged by the time its read returns, the database's `now()` that
 * every entry it writes carries (docs/decisions/D19-fleet-controls.md, "Temporary raises"), not
 * by the worker's clock: a worker whose clock runs a minute behind the database's must not admit
 * a reserve under a raise whose `until` the database has passed.
 */

const LAG_MS = 60_000

/** The machine's clock, a minute behind. */
const base = Clock.make()
const lagging: Clock.Clock = {
  [Clock.ClockTypeId]: Clock.ClockTypeId,
  unsafeCurrentTimeMillis: () => base.unsafeCurrentTimeMillis() - LAG_MS,
  currentTimeMillis: Effect.map(base.currentTimeMillis, (millis) => millis - LAG_MS),
  unsafeCurrentTimeNanos: () => base.unsafeCurrentTimeNanos() - BigInt(LAG_MS) * 1_000_000n,
  currentTimeNanos: Effect.map(base.currentTimeNanos, (nanos) => nanos - BigInt(LAG_MS) * 1_000_000n),
  sleep: (duration: Duration.Duration) => base.sleep(duration)
}

const reserve = (accountId: string, session_id: string, amount_usd: string): SettlementJob => ({
  kind: "reserve",
  payload: { account_id: accountId, session_id, amount_usd, idempotency_key: randomUUID() }
})

layer(TestSettlement().pipe(Layer.provide(Layer.setClock(lagging))), {
  excludeTestServices: true,
  timeout: "60 seconds"
})("the batch's time", (it) => {
  describe("a worker clock behind the database's", () => {
    it.effect("a raise ended by the database's clock no longer admits a reserve", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const settlement = yield* Settlement
        const apply = (job: SettlementJob) => Effect.withClock(settlement.apply(job), lagging)
        const account = yield* newAccount("1000")
        const [until] = yield* sql<{ until: Date }>`SELECT now() + interval '2 seconds' AS until`
        expect(until).toBeDefined()
        yield* saveLimits(account, [
          {
            scope: "account",
            scope_id: null,
            period: "month",
            amount_usd: "10",
            raise: { amount_usd: "100", until: until?.until ?? new Date(0) }
          }
        ])
        // While the raise lasts: 50 of its 100.
        const during = yield* apply(reserve(account.id, "s-1", "50"))
        expect(during.status).toBe("applied")
        // The database's clock passes `until`; the worker's is still a minute before it.
        yield* Effect.repeat(
          sql<{ passed: boolean }>`SELECT now() > ${until?.until ?? new Date(0)} AS passed`,
          { until: (rows) => rows[0]?.passed === true, schedule: Schedule.spaced("100 millis") }
        )
        const after = yield* apply(reserve(account.id, "s-2", "20"))
        expect(after.status).toBe("limit_reached")
        expect(after).toMatchObject({ limit: { amount_usd: "10.000000", used_usd: "50.000000" } })
      }).pipe(Effect.orDie))
  })
})
