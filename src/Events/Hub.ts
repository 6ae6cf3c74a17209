import { Cause, Effect, Fiber, Queue, Schedule, type Scope } from "effect"
import { Counter, Gauge } from "prom-client"
import { AppConfig } from "../Config.js"
import { type Account, accountKey } from "../Domain/Account.js"
import { Events } from "../Events.js"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { listen } from "../Sql/Listener.js"
import { EVENTS_CHANNEL, noticeOf, WALLET_CHANGES_CHANNEL } from "./Channel.js"
import type { EventRow } from "./Repo.js"
import { makeStreamGate } from "./StreamGate.js"

/** Events read from the log per statement, by an account's reader and by a stream catching up. */
const STREAM_PAGE = 100

/** The newest events an account's reader keeps for its streams; a stream further behind reads the log itself. */
const KEPT = 4 * STREAM_PAGE

/**
 * A change notice (D17) goes to an account's streams at most this often: the wallet writes of
 * that time (a settlement batch, a budget, a credit) are one notice, sent when it ends.
 */
export const CHANGE_NOTICE_MS = 250

/** How long an account's reader waits before trying again after a failed read (the database away). */
const RETRY_READ_AFTER = "1 second"

/**
 * One account's reader, shared by every stream of the account open on this process: woken by
 * the account's notifications, it reads what the log gained once and keeps the newest events,
 * which its streams then take, each after its own cursor.
 */
interface Feed {
  readonly account: Account
  /** Offered an item whenever the account's log may have grown. Sliding, one item: woken once however many events. */
  readonly wake: Queue.Queue<void>
  /** Each stream's wake-up: offered once the reader holds more events. */
  readonly followers: Set<Queue.Queue<void>>
  /** The newest position read; undefined until the reader has looked at the log. */
  head: number | undefined
  /** `kept` holds every event after this position up to `head`, oldest first. */
  keptAfter: number
  kept: Array<EventRow>
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** How many change notices the account's streams have been given; a stream sends one when this moves. */
  changes: number
  /** The pending notice's timer: the wallet changed, and the notice waits out `CHANGE_NOTICE_MS`. */
  noticeDue: ReturnType<typeof setTimeout> | undefined
}

/** What one stream sees of its account's reader. */
export interface Follower {
  /** Offered an item whenever the reader holds more events. */
  readonly wakes: Queue.Queue<void>
  /**
   * Up to a page of the account's events after `position`, oldest first: from what the reader
   * keeps, or from the log when the stream is further behind (a resume, or a slow reader);
   * none while the stream has every event the reader read.
   */
  readonly after: (position: number) => Effect.Effect<ReadonlyArray<EventRow>>
  /** How many change notices the account has had while the stream follows it; it moves after a wallet write. */
  readonly changes: () => number
}

/**
 * One LISTEN connection per process, fanned out to the live streams open on it (D17), with one
 * reader per account that has streams: a notification only says "this account's log grew", so
 * that account's reader reads the log after the last event it read, once however many streams
 * the account holds, and hands the events to them. Nothing is lost to a notification missed while
 * the connection was down (every reader reads again once it is back) and nothing is sent twice:
 * each stream keeps its own cursor. Accounts without an event wake nothing.
 *
 * It also counts the streams open, by user and by account, within their bounds.
 */
export class EventsHub extends Effect.Service<EventsHub>()("Events/Hub", {
  scoped: Effect.gen(function*() {
    const events = yield* Events
    const config = yield* AppConfig
    const { registry } = yield* Metrics
    const scope = yield* Effect.scope
    const gate = makeStreamGate(config.eventStreams)
    const feeds = new Map<string, Feed>()

    new Gauge({
      name: `${METRIC_PREFIX}event_streams`,
      help: "Live event streams open on this process (GET /developer/account/events/stream).",
      registers: [registry],
      collect() {
        this.set(gate.open())
      }
    })
    const reads = new Counter({
      name: `${METRIC_PREFIX}event_stream_log_reads_total`,
      help: "Reads of the event log for live streams on this process: by an account's reader (one per wake, " +
        "however many streams the account holds), or by one stream behind what that reader keeps.",
      labelNames: ["by"] as const,
      registers: [registry]
    })
    const readsByAccount = reads.labels("account")
    const readsByStream = reads.labels("stream")
    // Shown from the start, at zero, so a rate over them has a beginning.
    readsByAccount.inc(0)
    readsByStream.inc(0)

    const wakeFollowers = (feed: Feed) => {
      for (const queue of feed.followers) Queue.unsafeOffer(queue, undefined)
    }

    const keep = (feed: Feed, rows: ReadonlyArray<EventRow>) => {
      feed.kept.push(...rows)
      const dropped = feed.kept.splice(0, Math.max(0, feed.kept.length - KEPT))
      const lastDropped = dropped[dropped.length - 1]
      if (lastDropped !== undefined) feed.keptAfter = lastDropped.position
    }

    /** Reads what the log gained after `head`, page by page, waking the streams after each page. */
    const catchUp = (feed: Feed, head: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        readsByAccount.inc()
        const rows = yield* events.read(feed.account, { position: head, type: null, limit: STREAM_PAGE })
        const last = rows[rows.length - 1]
        if (last === undefined) return
        keep(feed, rows)
        feed.head = last.position
        wakeFollowers(feed)
        if (rows.length === STREAM_PAGE) yield* catchUp(feed, last.position)
      })

    /** Where the log ends when the reader starts: its streams take what comes after (or read the log before it). */
    const start = (feed: Feed) =>
      Effect.gen(function*() {
        if (feed.head !== undefined) return
        const newest = yield* events.newestPosition(feed.account)
        feed.head = newest
        feed.keptAfter = newest
        wakeFollowers(feed)
      })

    const woken = (feed: Feed) =>
      Effect.zipRight(
        Queue.take(feed.wake),
        Effect.suspend(() => feed.head === undefined ? Effect.void : catchUp(feed, feed.head))
      )

    /**
     * The reader's life: a read each time it is woken. A read that fails (the database away) is
     * tried again a second later; its streams wait meanwhile, and miss nothing.
     */
    const run = (feed: Feed) =>
      Effect.zipRight(start(feed), Effect.forever(woken(feed))).pipe(
        Effect.catchAllDefect(Effect.fail),
        Effect.tapError((defect) =>
          Effect.zipRight(
            Effect.logWarning("an event stream reader's read failed; trying again", Cause.die(defect)),
            Queue.offer(feed.wake, undefined)
          )
        ),
        Effect.retry(Schedule.spaced(RETRY_READ_AFTER))
      )

    /** The account's wallet changed: one notice for whatever else changes within `CHANGE_NOTICE_MS`. */
    const walletChanged = (feed: Feed) => {
      if (feed.noticeDue !== undefined) return
      feed.noticeDue = setTimeout(() => {
        feed.noticeDue = undefined
        feed.changes += 1
        wakeFollowers(feed)
      }, CHANGE_NOTICE_MS)
    }

    yield* listen(WALLET_CHANGES_CHANNEL, {
      // Deaf for a while: a change may have gone unheard, so every account's streams are told.
      onListening: () => {
        for (const feed of feeds.values()) walletChanged(feed)
      },
      onLost: () => {},
      onMessage: (payload) => {
        const feed = feeds.get(payload)
        if (feed !== undefined) walletChanged(feed)
      },
      onHeartbeatSent: () => {},
      onHeartbeatAnswered: () => {}
    })

    yield* listen(EVENTS_CHANNEL, {
      // Listening again after a loss: what was committed meanwhile went unheard, so every reader looks.
      onListening: () => {
        for (const feed of feeds.values()) Queue.unsafeOffer(feed.wake, undefined)
      },
      onLost: () => {},
      onMessage: (payload) => {
        const feed = feeds.get(payload)
        if (feed !== undefined) Queue.unsafeOffer(feed.wake, undefined)
      },
      onHeartbeatSent: () => {},
      onHeartbeatAnswered: () => {}
    })

    /** A place for one more stream of the user in the account (D17's bounds), or 429; the function frees it. */
    const admit = (account: Account, userId: string) => gate.enter(account, userId)

    /** Joins the account's reader, starting one if the account has none here (in one step, so two never start). */
    const join = (account: Account, queue: Queue.Queue<void>) =>
      Effect.gen(function*() {
        const key = noticeOf(accountKey(account))
        const wake = yield* Queue.sliding<void>(1)
        const { feed, started } = yield* Effect.sync(() => {
          const existing = feeds.get(key)
          if (existing !== undefined) {
            existing.followers.add(queue)
            return { feed: existing, started: false }
          }
          const feed: Feed = {
            account,
            wake,
            followers: new Set([queue]),
            head: undefined,
            keptAfter: 0,
            kept: [],
            fiber: undefined,
            changes: 0,
            noticeDue: undefined
          }
          feeds.set(key, feed)
          return { feed, started: true }
        })
        // Started from a stream's acquisition, which is uninterruptible: the reader itself must not be.
        if (started) feed.fiber = yield* Effect.forkIn(Effect.interruptible(run(feed)), scope)
        return { key, feed }
      })

    const leave = (key: string, feed: Feed, queue: Queue.Queue<void>) =>
      Effect.suspend(() => {
        feed.followers.delete(queue)
        if (feed.followers.size > 0 || feeds.get(key) !== feed) return Effect.void
        feeds.delete(key)
        clearTimeout(feed.noticeDue)
        return feed.fiber === undefined ? Effect.void : Fiber.interruptFork(feed.fiber)
      })

    /** The stream's view of its account's reader, for as long as the scope lasts. */
    const follow = (account: Account): Effect.Effect<Follower, never, Scope.Scope> =>
      Effect.gen(function*() {
        const wakes = yield* Queue.sliding<void>(1)
        const { feed } = yield* Effect.acquireRelease(
          join(account, wakes),
          ({ feed, key }) => leave(key, feed, wakes)
        )
        const after = (position: number): Effect.Effect<ReadonlyArray<EventRow>> =>
          Effect.suspend(() => {
            if (feed.head === undefined || position >= feed.head) return Effect.succeed([])
            if (position >= feed.keptAfter) {
              return Effect.succeed(feed.kept.filter((row) => row.position > position).slice(0, STREAM_PAGE))
            }
            readsByStream.inc()
            return events.read(account, { position, type: null, limit: STREAM_PAGE })
          })
        return { wakes, after, changes: () => feed.changes } satisfies Follower
      })

    return { admit, follow } as const
  }),
  dependencies: [Events.Default]
}) {}
