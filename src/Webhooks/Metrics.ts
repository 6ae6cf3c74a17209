import { DateTime, Effect, Runtime } from "effect"
import { Counter, Gauge } from "prom-client"
import { accountOfKey } from "../Domain/Account.js"
import { Events } from "../Events.js"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { WebhooksRepo } from "./Repo.js"

/** What became of a delivery attempt: the `outcome` label's values. */
export type DeliveryOutcome = "delivered" | "retry" | "failed" | "gone" | "skipped"

/**
 * The webhooks process's instruments (D17), on its own `/metrics` (`WEBHOOK_WORKER_METRICS_PORT`):
 * deliveries by outcome, and the age of the oldest event not yet handed to delivery, read at each scrape.
 */
export class WebhookMetrics extends Effect.Service<WebhookMetrics>()("Webhooks/Metrics", {
  effect: Effect.gen(function*() {
    const { registry } = yield* Metrics
    const repo = yield* WebhooksRepo
    const events = yield* Events
    const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
    const deliveries = new Counter({
      name: `${METRIC_PREFIX}webhook_deliveries_total`,
      help: "Webhook delivery attempts by outcome (delivered, retry, failed, gone, skipped).",
      labelNames: ["outcome"] as const,
      registers: [registry]
    })
    // Every outcome is shown from the start, at 0: a failure share over `rate()` has a denominator
    // before the first attempt, and the alert rules' series exist in every scrape.
    const outcomes: ReadonlyArray<DeliveryOutcome> = ["delivered", "retry", "failed", "gone", "skipped"]
    for (const outcome of outcomes) deliveries.inc({ outcome }, 0)
    /** Seconds since the oldest event some relay cursor has not passed was written; 0 when none waits. */
    const relayLag = Effect.gen(function*() {
      const now = yield* DateTime.now
      let oldest = 0
      for (const cursor of yield* repo.cursorPositions()) {
        const account = accountOfKey(cursor)
        const [next] = yield* events.read(account, { position: cursor.position, type: null, limit: 1 })
        if (next !== undefined) oldest = Math.max(oldest, DateTime.distance(next.created_at, now) / 1000)
      }
      return oldest
    })
    new Gauge({
      name: `${METRIC_PREFIX}webhook_relay_lag_seconds`,
      help: "Age of the oldest event not yet handed to webhook delivery (0 when every event is).",
      registers: [registry],
      async collect() {
        this.set(await runPromise(relayLag.pipe(Effect.orElseSucceed(() => 0))))
      }
    })
    return {
      record: (outcome: DeliveryOutcome) => deliveries.inc({ outcome }),
      relayLag
    } as const
  }),
  dependencies: [WebhooksRepo.Default, Events.Default]
}) {}
