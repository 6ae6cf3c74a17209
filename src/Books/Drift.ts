import { Clock, Duration, Effect, Layer, Option, Runtime } from "effect"
import { Gauge } from "prom-client"
import { Books } from "../Books.js"
import { AppConfig } from "../Config.js"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { Redis } from "../Redis.js"

/** The drift check's job on the workers' housekeeping queue (D19). */
export const BOOKS_DRIFT_CHECK = "books-drift"

/** Wallets and groups a warning names; the count says how many there are in all. */
const NAMED_IN_LOG = 10

/**
 * The last check's figure, for every worker to show alike: one hash `{count, checked_at}` (ms)
 * under the deployment's prefix, written whole by one command. The check runs in one process per
 * interval; a gauge set only there would show the figure on one worker and 0 on the others.
 */
const figureKey = (redis: Redis) => redis.key("metrics", "books-drift")

/** The stored figure: none until a check has run. */
export type StoredFigure = Option.Option<{ readonly count: number; readonly checkedAt: number }>

/**
 * The drift check (D19): every wallet row, running total and grant (D21) against the entries,
 * through the books' own rules (`Books.drift`), its figure kept for the gauges, and a warning that
 * names what disagrees. The workers run it on a schedule; `cli ledger verify` runs it too, so its
 * figure is the gauge's at once.
 */
export class BooksDrift extends Effect.Service<BooksDrift>()("Books/Drift", {
  effect: Effect.gen(function*() {
    const books = yield* Books
    const redis = yield* Redis

    const record = (count: number, checkedAt: number) =>
      Effect.tryPromise(() =>
        redis.client.hset(figureKey(redis), { count: String(count), checked_at: String(checkedAt) })
      ).pipe(
        Effect.catchAll((error) =>
          // The figure waits for the next check; the stale-check alert says so if it never comes.
          Effect.logWarning("the books drift figure could not be stored in Redis", error)
        )
      )

    /** Checks every wallet and stores the figure; the time is the check's start, the books as they were then. */
    const check = Effect.fn("BooksDrift.check")(function*() {
      const checkedAt = yield* Clock.currentTimeMillis
      const drift = yield* books.drift(Option.none())
      if (drift.count > 0) {
        const named = drift.mismatches.slice(0, NAMED_IN_LOG).map((mismatch) =>
          mismatch.grant_id !== undefined
            ? `wallet ${mismatch.wallet_id} grant ${mismatch.grant_id}`
            : mismatch.group === undefined
            ? `wallet ${mismatch.wallet_id}`
            : `wallet ${mismatch.wallet_id} day ${mismatch.group.day} repository ${
              mismatch.group.repository_id ?? "none"
            } user ${mismatch.group.user_id ?? "none"}`
        )
        yield* Effect.logWarning("the books drift from the ledger: run `cli ledger verify`").pipe(
          Effect.annotateLogs({ drift: drift.count, disagreeing: named })
        )
      }
      yield* record(drift.count, checkedAt)
      return { ...drift, checked_at: new Date(checkedAt).toISOString() }
    })

    /** The figure as a worker reads it at a scrape; undefined when Redis does not answer. */
    const read: Effect.Effect<StoredFigure | undefined> = Effect.tryPromise(() =>
      redis.client.hmget(figureKey(redis), "count", "checked_at")
    ).pipe(
      Effect.map(([count, checkedAt]) =>
        count === null || count === undefined || checkedAt === null || checkedAt === undefined
          ? Option.none()
          : Option.some({ count: Number(count), checkedAt: Number(checkedAt) })
      ),
      Effect.orElseSucceed(() => undefined)
    )

    return { check, read } as const
  }),
  dependencies: [Books.Default, Redis.Default]
}) {}

/**
 * The drift gauges on a worker's own metrics (D19), read from the stored figure at each scrape, so
 * every worker shows the same: take them with max. Left out when Redis does not answer (no figure
 * is better than a stale one); the time is 0 until a first check, so an alert on checks that stopped
 * fires on checks that never ran too. None when the check is off.
 */
export const BooksDriftGaugesLive = Layer.effectDiscard(Effect.gen(function*() {
  const every = (yield* AppConfig).books.driftCheckEvery
  if (Option.isNone(every)) return
  const { registry } = yield* Metrics
  const drift = yield* BooksDrift
  const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
  // One read per scrape, shared by both gauges (a scrape collects them at once).
  let reading: Promise<StoredFigure | undefined> | undefined
  const readFigure = () =>
    reading ??= runPromise(drift.read).finally(() => {
      reading = undefined
    })
  new Gauge({
    name: `${METRIC_PREFIX}books_drift`,
    help:
      "Wallet rows, running spend totals and credit grants that disagree with the ledger's entries, at the last check (every worker shows the same figure).",
    registers: [registry],
    async collect() {
      const figure = await readFigure()
      if (figure === undefined || Option.isNone(figure)) this.remove()
      else this.set(figure.value.count)
    }
  })
  new Gauge({
    name: `${METRIC_PREFIX}books_drift_checked_timestamp_seconds`,
    help: "When the last books drift check started (Unix time); 0 before the first.",
    registers: [registry],
    async collect() {
      const figure = await readFigure()
      if (figure === undefined) this.remove()
      else this.set(Option.match(figure, { onNone: () => 0, onSome: ({ checkedAt }) => checkedAt / 1000 }))
    }
  })
  new Gauge({
    name: `${METRIC_PREFIX}books_drift_check_interval_seconds`,
    help: "How often this worker's fleet checks the books for drift (BOOKS_DRIFT_CHECK_SECONDS).",
    registers: [registry]
  }).set(Duration.toSeconds(every.value))
}))
