import { describe, expect, layer } from "@effect/vitest"
import { Queue, QueueEvents } from "bullmq"
import { Effect, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { AppConfig } from "../src/Config.js"
import { privateRedis } from "./support/privateRedis.js"
import { serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/**
 * A session runner as the README shows it (D8): plain BullMQ, `new
 * Queue("settlement", { connection })` and nothing else, against the worker
 * as `npm start` runs it with no queue setting. BullMQ's default prefix is
 * shared by everyone on a Redis, so this file brings a Redis of its own.
 */
layer(TestSettlement(), { excludeTestServices: true, timeout: "120 seconds" })("plain BullMQ producers (D8)", (it) => {
  describe("with BullMQ's defaults", () => {
    it.scoped("reserve, spend and release reach the worker, each with its result; one key on two accounts applies twice", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const redis = yield* privateRedis()
        const { SETTLEMENT_QUEUE_PREFIX: _ignored, ...environment } = serviceEnvironment(config, "plain-bullmq", {
          REDIS_URL: redis.url
        })
        const worker = yield* startService("worker", environment)

        // As a runner writes it.
        const connection = new IORedis(redis.url, { maxRetriesPerRequest: null })
        const queue = new Queue("settlement", { connection })
        const events = new QueueEvents("settlement", { connection: { url: redis.url } })
        yield* Effect.addFinalizer(() =>
          Effect.promise(async () => {
            await events.close()
            await queue.close()
            await connection.quit()
          })
        )
        yield* waitFor(
          "the worker takes jobs",
          Effect.promise(() => queue.getWorkers()).pipe(
            Effect.map((workers) => workers.length > 0 ? Option.some(true) : Option.none())
          ),
          { limit: "30 seconds", alive: [worker] }
        )
        const options = { attempts: 10, backoff: { type: "exponential", delay: 500 } } as const
        const settle = (name: string, data: Record<string, string>) =>
          Effect.promise(async () => {
            const job = await queue.add(name, data, options)
            return (await job.waitUntilFinished(events, 30_000)) as { status: string; wallet: { reserved_usd: string } }
          })

        const account = yield* newAccount("10")
        const reserve = yield* settle("reserve", {
          account_id: account.id,
          session_id: "run-1",
          amount_usd: "2.50",
          idempotency_key: "run-1-reserve"
        })
        expect(reserve).toMatchObject({ status: "applied", wallet: { reserved_usd: "2.500000" } })
        const spend = yield* settle("spend", {
          account_id: account.id,
          session_id: "run-1",
          amount_usd: "1.25",
          idempotency_key: "run-1-spend"
        })
        expect(spend).toMatchObject({ status: "applied", wallet: { reserved_usd: "1.250000", spent_usd: "1.250000" } })
        const release = yield* settle("release", {
          account_id: account.id,
          session_id: "run-1",
          idempotency_key: "run-1-release"
        })
        expect(release).toMatchObject({ status: "applied", wallet: { reserved_usd: "0.000000" } })

        // Keys are per account: the same key on another account is another job, applied too.
        const other = yield* newAccount("10")
        const first = yield* settle("reserve", {
          account_id: account.id,
          session_id: "run-2",
          amount_usd: "1",
          idempotency_key: "shared-key"
        })
        const second = yield* settle("reserve", {
          account_id: other.id,
          session_id: "run-2",
          amount_usd: "3",
          idempotency_key: "shared-key"
        })
        expect(first).toMatchObject({ status: "applied", wallet: { owner_id: account.id, reserved_usd: "1.000000" } })
        expect(second).toMatchObject({ status: "applied", wallet: { owner_id: other.id, reserved_usd: "3.000000" } })
      }))
  })
})
