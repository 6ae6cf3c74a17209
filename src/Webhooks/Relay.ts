import { SqlClient } from "@effect/sql"
import { Data, Duration, Effect, Layer, Queue, Schema } from "effect"
import { AppConfig } from "../Config.js"
import { Account, AccountKind } from "../Domain/Account.js"
import { Events } from "../Events.js"
import { listen } from "../Sql/Listener.js"
import { deliveryOf, takes } from "../Webhooks.js"
import { deliveryJobId, WebhookQueue } from "./Queue.js"
import { WebhooksRepo } from "./Repo.js"

/** Delivery attempts deleted per sweep once older than the days events are kept. */
const PRUNE_BATCH = 1_000

/** Events relayed per transaction of one account. */
const RELAY_BATCH = 500

/** The channel the event log's trigger announces appends on (migration 0015), payload `kind:id`. */
const CHANNEL = "account_events"

const isAccountKind = Schema.is(AccountKind)

/** Redis did not take a relay's jobs in time: the transaction rolls back and the account waits for the next sweep. */
class RelayStalled extends Data.TaggedError("RelayStalled")<{ readonly message: string }> {}

const accountOf = (key: string) => {
  const [kind = "", id = ""] = key.split(":")
  return isAccountKind(kind) ? new Account({ kind, id }) : undefined
}

/**
 * The relay (D17): from each account's event log to the delivery queue, one job per event and
 * enabled endpoint whose types match. Per account, in one transaction holding the account's
 * cursor row (`FOR UPDATE SKIP LOCKED`, so relays of several processes share the accounts and
 * never relay one twice at once): read the events after the cursor, add their jobs, then advance
 * the cursor. A process killed between the two adds the same jobs again when the account is next
 * relayed, under the same ids, which BullMQ ignores while it keeps them: nothing is lost, and
 * nothing is sent twice that can be avoided.
 *
 * Woken by the log's notification for the account that grew, and every `WEBHOOK_RELAY_SWEEP_MS`
 * for every account (what a lost notification or a crashed relay left behind).
 */
export const WebhookRelayLive = Layer.scopedDiscard(Effect.gen(function*() {
  const repo = yield* WebhooksRepo
  const events = yield* Events
  const queue = yield* WebhookQueue
  const sql = yield* SqlClient.SqlClient
  const { relaySweepMs } = (yield* AppConfig).webhooks

  const pending = new Set<string>()
  let sweepAll = true
  const wake = yield* Queue.sliding<void>(1)

  // Notifications only hasten the relay; the sweep alone relays everything. So behind a pooler in
  // transaction mode without DATABASE_DIRECT_URL, where LISTEN cannot work, the worker still runs
  // (as it did before it relayed), and says its relay waits for the sweep.
  yield* listen(CHANNEL, {
    // (Re)listening: what was committed while deaf went unheard, so every account is looked at.
    onListening: () => {
      sweepAll = true
      Queue.unsafeOffer(wake, undefined)
    },
    onLost: () => {},
    onMessage: (payload) => {
      pending.add(payload)
      Queue.unsafeOffer(wake, undefined)
    },
    onHeartbeatSent: () => {},
    onHeartbeatAnswered: () => {}
  }).pipe(
    Effect.catchAllDefect((defect) =>
      Effect.logWarning(
        `webhook relay: no notifications (${
          defect instanceof Error ? defect.message : String(defect)
        }); events are relayed by the sweep, every ${relaySweepMs} ms`
      )
    )
  )

  /** One batch of the account's events: how many were relayed (0 when none are left or another relay holds it). */
  const relayBatch = (account: Account) =>
    sql.withTransaction(Effect.gen(function*() {
      const key = { account_kind: account.kind, account_id: account.id }
      const cursor = yield* repo.lockCursor(key)
      if (cursor._tag === "None") return 0
      const rows = yield* events.read(account, { position: cursor.value.position, type: null, limit: RELAY_BATCH })
      const last = rows[rows.length - 1]
      if (last === undefined) return 0
      const endpoints = yield* repo.enabledOf(key)
      // Bounded: with Redis away the add would wait for ever, holding the cursor's lock and a connection.
      yield* queue.add(rows.flatMap((event) =>
        endpoints.filter((endpoint) => takes(endpoint, event.type)).map((endpoint) => ({
          id: deliveryJobId(event.id, endpoint.id),
          job: deliveryOf(event, endpoint)
        }))
      )).pipe(Effect.timeoutFail({
        duration: "10 seconds",
        onTimeout: () =>
          new RelayStalled({ message: "Redis took no jobs for 10 s" })
      }))
      // Only once Redis holds every job: a cursor never passes an event whose deliveries are not queued.
      yield* repo.advanceCursor({ ...key, position: last.position })
      return rows.length
    }))

  const relay = (account: Account) =>
    Effect.gen(function*() {
      while ((yield* relayBatch(account)) === RELAY_BATCH) {
        // More follow: the next batch in a transaction of its own.
      }
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.zipRight(
          Effect.logWarning("webhook relay failed for an account; retried at the next sweep", cause),
          Effect.sync(() => {
            sweepAll = true
          })
        )
      )
    )

  const round = Effect.gen(function*() {
    if (sweepAll) {
      sweepAll = false
      const all = yield* repo.cursors().pipe(
        Effect.catchAllCause((cause) =>
          Effect.as(
            Effect.zipRight(
              Effect.logWarning("webhook relay could not list its accounts", cause),
              Effect.sync(() => {
                sweepAll = true
              })
            ),
            []
          )
        )
      )
      for (const key of all) pending.add(`${key.account_kind}:${key.account_id}`)
      // Delivery attempts past the 30 days events are kept, a batch per sweep of each worker.
      yield* repo.pruneDeliveries(PRUNE_BATCH).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("pruning webhook delivery attempts failed", cause))
      )
    }
    const accounts = [...pending]
    pending.clear()
    for (const key of accounts) {
      const account = accountOf(key)
      if (account !== undefined) yield* relay(account)
    }
  })

  const loop = Effect.gen(function*() {
    yield* round
    const woken = yield* Queue.take(wake).pipe(
      Effect.as(true),
      Effect.timeoutTo({ duration: Duration.millis(relaySweepMs), onSuccess: () => true, onTimeout: () => false })
    )
    if (!woken) sweepAll = true
  }).pipe(Effect.forever)
  yield* Effect.forkScoped(loop)
  yield* Effect.logInfo("webhook relay started")
}))
