import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { serveOn } from "../src/Http.js"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { call } from "./support/TestApp.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/** The API and the worker side by side on one database and Redis prefix, as `npm start` runs them. */
const ApiBesideWorker = serveOn(NodeHttpServer.layerTest).pipe(Layer.provideMerge(TestSettlement()))

layer(ApiBesideWorker, { excludeTestServices: true, timeout: "60 seconds" })("settlement metrics", (it) => {
  it.effect("the API's /metrics shows the worker's jobs by kind and outcome, and the queue depth", () =>
    Effect.gen(function*() {
      const account = yield* newAccount("1")
      const producer = yield* SettlementProducer
      const reserved = yield* producer.enqueueReserve({
        account_id: account.id,
        session_id: "m-1",
        amount_usd: "0.5",
        idempotency_key: "m-1:reserve"
      })
      expect((yield* reserved.result()).status).toBe("applied")
      const refused = yield* producer.enqueueReserve({
        account_id: account.id,
        session_id: "m-2",
        amount_usd: "5",
        idempotency_key: "m-2:reserve"
      })
      expect((yield* refused.result()).status).toBe("insufficient_funds")
      // The worker publishes its counters every few seconds; the API sums what the live workers published.
      const text = yield* call("GET", "/metrics").pipe(
        Effect.map((reply) => String(reply.body)),
        Effect.filterOrFail((body) => body.includes(`outcome="insufficient_funds"`)),
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("15 seconds"))),
        Effect.orDie
      )
      expect(text).toMatch(/account_api_settlement_jobs_total\{kind="reserve",outcome="applied"\} 1/)
      expect(text).toMatch(/account_api_settlement_jobs_total\{kind="reserve",outcome="insufficient_funds"\} 1/)
      expect(text).toContain(`account_api_settlement_job_duration_seconds_bucket{le="0.1",kind="reserve"}`)
      expect(text).toMatch(/account_api_queue_jobs\{state="completed"\} \d+/)
      expect(text).not.toContain(account.id)
      expect(text).toMatch(/account_api_queue_metrics_available 1/)
    }))

  it.effect("a job name the worker does not know counts as kind unknown, never as a series of its own (D9)", () =>
    Effect.gen(function*() {
      const producer = yield* SettlementProducer
      const names = ["refund", "refund-2", `x-${"y".repeat(200)}`]
      const jobs = yield* Effect.promise(() =>
        Promise.all(names.map((name) => producer.queue.add(name, { anything: true })))
      )
      const text = yield* call("GET", "/metrics").pipe(
        Effect.map((reply) => String(reply.body)),
        Effect.filterOrFail((body) =>
          /account_api_settlement_jobs_total\{kind="unknown",outcome="invalid"\} 3/.test(body)
        ),
        Effect.retry(Schedule.spaced("500 millis").pipe(Schedule.upTo("15 seconds"))),
        Effect.orDie
      )
      for (const name of names) expect(text).not.toContain(`kind="${name}"`)
      expect(jobs).toHaveLength(3)
    }))
})
