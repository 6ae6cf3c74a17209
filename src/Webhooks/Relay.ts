import { SqlClient } from "@effect/sql"
import { Cause, Clock, Data, Duration, Effect, Exit, Layer, Option, Queue } from "effect"
import { AppConfig } from "../Config.js"
import { type Account, accountKey, accountOfKey } from "../Domain/Account.js"
import { Events } from "../Events.js"
import { accountOfNotice, EVENTS_CHANNEL, noticeOf } from "../Events/Channel.js"
import { listen } from "../Sql/Listener.js"
import { deliveryOf, takes } from "../Webhooks.js"
import { deliveryJobId, WebhookQueue } from "./Queue.js"
import { type Cursor, type EndpointRow, WebhooksRepo } from "./Repo.js"

/** Delivery attempts deleted per sweep once older than the days events are kept. */
const PRUNE_BATCH = 1_000

/** Events of one account a relay round takes. */
const RELAY_BATCH = 500

/** The shortest time between the starts of two relay rounds of a process. */
const RELAY_ROUND_MS = 100

/** Accounts one relay round (one transaction) takes. */
const RELAY_ACCOUNTS = 100

/** Redis did not take a relay's jobs in time: the transaction rolls back and the account waits for the next sweep. */
class RelayStalled extends Data.TaggedError("RelayStalled")<{ readonly message: string }> {}

/** Whether a round failed because Redis took no jobs: then no other round would fare better. */
const stalled = (cause: Cause.Cause<unknown>) =>
  Option.exists(Cause.failureOption(cause), (error) => error instanceof RelayStalled)

/**
 * The relay (D17): from each account's event log to the delivery queue, one job per event and
 * enabled endpoint whose types match. In rounds of up to `RELAY_ACCOUNTS` accounts, each one
 * transaction of a few statements holding the accounts' cursor rows (`FOR UPDATE SKIP LOCKED`, so
 * relays of several processes share the accounts and never relay one twice at once): read the
 * events after the cursors, add their jobs, then advance the cursors. A process killed between the
 * two adds the same jobs again when the accounts are next relayed, under the same ids, which
 * BullMQ ignores while it keeps them: nothing is lost, and nothing is sent twice that can be
 * avoided. A statement per round, not per account: under load a round takes every account that
 * grew meanwhile.
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
  yield* listen(EVENTS_CHANNEL, {
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

  /**
   * One round over some accounts, in one transaction whatever their number: their cursors locked,
   * their events read, their endpoints found, the jobs added and the cursors advanced, a statement
   * each. Answers the accounts with more events than a round takes (relayed again at once).
   */
  const relayRound = (accounts: ReadonlyArray<Account>) =>
    sql.withTransaction(Effect.gen(function*() {
      const cursors = yield* repo.lockCursors(accounts.map(accountKey))
      if (cursors.length === 0) return []
      const rows = yield* events.readEach(
        cursors.map((cursor) => ({ account: accountOfKey(cursor), position: cursor.position })),
        RELAY_BATCH
      )
      if (rows.length === 0) return []
      const lastOf = new Map<string, Cursor>()
      const countOf = new Map<string, number>()
      for (const row of rows) {
        const key = noticeOf(row)
        lastOf.set(key, { account_kind: row.account_kind, account_id: row.account_id, position: row.position })
        countOf.set(key, (countOf.get(key) ?? 0) + 1)
      }
      const endpointsOf = new Map<string, Array<EndpointRow>>()
      for (const endpoint of yield* repo.enabledOf([...lastOf.values()])) {
        const key = noticeOf(endpoint)
        endpointsOf.set(key, [...endpointsOf.get(key) ?? [], endpoint])
      }
      // Bounded: with Redis away the add would wait for ever, holding the cursors' locks and a connection.
      yield* queue.add(rows.flatMap((event) =>
        (endpointsOf.get(noticeOf(event)) ?? []).filter((endpoint) => takes(endpoint, event.type)).map((
          endpoint
        ) => ({ id: deliveryJobId(event.id, endpoint.id), job: deliveryOf(event, endpoint) }))
      )).pipe(Effect.timeoutFail({
        duration: "10 seconds",
        onTimeout: () =>
          new RelayStalled({ message: "Redis took no jobs for 10 s" })
      }))
      // Only once Redis holds every job: a cursor never passes an event whose deliveries are not queued.
      yield* repo.advanceCursors([...lastOf.values()])
      return [...countOf].filter(([, count]) => count === RELAY_BATCH).map(([key]) => accountOfNotice(key))
        .filter((account) => account !== undefined)
    }))

  /**
   * Relays the accounts' logs to their ends, `RELAY_ACCOUNTS` accounts a round. A round that fails
   * is done again an account a round, so an account that cannot be relayed holds up none other;
   * those that fail wait for the next sweep. With Redis away (a round stalled) the rest waits too.
   */
  const relay = (accounts: ReadonlyArray<Account>) =>
    Effect.gen(function*() {
      let left = accounts
      let failed = 0
      while (left.length > 0) {
        const taken = left.slice(0, RELAY_ACCOUNTS)
        left = left.slice(RELAY_ACCOUNTS)
        const together = yield* Effect.exit(relayRound(taken))
        if (Exit.isSuccess(together)) {
          left = [...left, ...together.value]
          continue
        }
        if (stalled(together.cause) || taken.length === 1) return yield* Effect.failCause(together.cause)
        for (const account of taken) {
          const alone = yield* Effect.exit(relayRound([account]))
          if (Exit.isSuccess(alone)) left = [...left, ...alone.value]
          else if (stalled(alone.cause)) return yield* Effect.failCause(alone.cause)
          else failed++
        }
      }
      if (failed > 0) {
        sweepAll = true
        yield* Effect.logWarning(`webhook relay failed for ${failed} account(s); retried at the next sweep`)
      }
    }).pipe(
      Effect.catchAllCause((cause) =>
        Effect.zipRight(
          Effect.logWarning("webhook relay failed; retried at the next sweep", cause),
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
      for (const key of all) pending.add(noticeOf(key))
      // Delivery attempts past the 30 days events are kept, a batch per sweep of each worker.
      yield* repo.pruneDeliveries(PRUNE_BATCH).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("pruning webhook delivery attempts failed", cause))
      )
    }
    const accounts = [...pending].map(accountOfNotice).filter((account) => account !== undefined)
    pending.clear()
    yield* relay(accounts)
  })

  let lastRound = 0
  const loop = Effect.gen(function*() {
    // Rounds at most every `RELAY_ROUND_MS`: under load, what the next notifications name joins one
    // round (a few statements for them all); an event after a quiet spell is relayed at once.
    const since = (yield* Clock.currentTimeMillis) - lastRound
    if (since < RELAY_ROUND_MS) yield* Effect.sleep(Duration.millis(RELAY_ROUND_MS - since))
    lastRound = yield* Clock.currentTimeMillis
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
