import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Credentials } from "../src/Auth/Credentials.js"
import { AppConfig } from "../src/Config.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { DatabaseLive } from "../src/Sql.js"
import { Wallets } from "../src/Wallets.js"
import { serviceEnvironment, settlementQueue, startService } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/** The typed producer, with no worker in this process: the worker is a real one, started when the test says. */
const ProducerOnly = Layer.mergeAll(SettlementProducer.Default, Wallets.Default, Credentials.Default).pipe(
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TestConfig({ SETTLEMENT_RECOVER_AFTER_MS: "500" }))
)

layer(ProducerOnly, { excludeTestServices: true, timeout: "90 seconds" })("a job lost from Redis (D14)", (it) => {
  describe("the typed producer", () => {
    it.scoped("adds a job again, same key, when its result has not come within the bound: it applies once", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const sql = yield* SqlClient.SqlClient
        const producer = yield* SettlementProducer
        const account = yield* newAccount("10")
        const key = randomUUID()
        const enqueued = yield* producer.enqueueReserve({
          account_id: account.id,
          session_id: "lost",
          amount_usd: "2",
          idempotency_key: key
        })

        // The runner is waiting for the result when the job is lost behind its back, before any
        // worker took it (as after a flush, or a restore from an old snapshot).
        const waiting = yield* Effect.fork(enqueued.result("60 seconds"))
        yield* Effect.sleep("200 millis")
        const queue = yield* settlementQueue(config, config.settlementQueuePrefix)
        const id = enqueued.job.id ?? ""
        expect(yield* Effect.promise(() => queue.remove(id))).toBe(1)
        expect(yield* Effect.promise(() => queue.getJob(id))).toBeUndefined()
        yield* Effect.sleep("1500 millis")
        // Added again by the producer, under the same id.
        expect((yield* Effect.promise(() => queue.getJob(id)))?.data).toMatchObject({ idempotency_key: key })
        yield* startService("worker", serviceEnvironment(config, config.settlementQueuePrefix))
        const result = yield* waiting.await.pipe(Effect.flatten)
        expect(result).toMatchObject({ status: "applied", wallet: { reserved_usd: "2.000000" } })
        const entries = yield* sql<
          { count: string }
        >`SELECT count(*)::text AS count FROM ledger_entries WHERE session_id = 'lost'`
        expect(entries).toEqual([{ count: "1" }])
      }))
  })
})
