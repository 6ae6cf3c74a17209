import { Effect, Queue } from "effect"
import { Gauge } from "prom-client"
import { type Account, accountKey } from "../Domain/Account.js"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { listen } from "../Sql/Listener.js"
import { EVENTS_CHANNEL, noticeOf } from "./Channel.js"

/**
 * One LISTEN connection per process, fanned out to the live streams open on it (D17). A
 * notification only says "this account's log grew": each stream then reads the log after the
 * last event it sent, so nothing is lost to a notification missed while the connection was
 * down (every stream reads again once it is back) and nothing is sent twice.
 */
export class EventsHub extends Effect.Service<EventsHub>()("Events/Hub", {
  scoped: Effect.gen(function*() {
    const streams = new Map<string, Set<Queue.Queue<void>>>()
    let open = 0
    const { registry } = yield* Metrics
    new Gauge({
      name: `${METRIC_PREFIX}event_streams`,
      help: "Live event streams open on this process (GET /developer/account/events/stream).",
      registers: [registry],
      collect() {
        this.set(open)
      }
    })
    const wake = (queues: Iterable<Queue.Queue<void>>) => {
      for (const queue of queues) Queue.unsafeOffer(queue, undefined)
    }

    yield* listen(EVENTS_CHANNEL, {
      // Listening again after a loss: what was committed meanwhile went unheard, so every stream looks.
      onListening: () => {
        for (const queues of streams.values()) wake(queues)
      },
      onLost: () => {},
      onMessage: (payload) => wake(streams.get(payload) ?? []),
      onHeartbeatSent: () => {},
      onHeartbeatAnswered: () => {}
    })

    /**
     * A queue that is offered an item whenever the account's log may have grown, for as long as
     * the scope lasts. Sliding, one item: a stream that is busy sending wakes once, not once per event.
     */
    const subscribe = (account: Account) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          const queue = yield* Queue.sliding<void>(1)
          const key = noticeOf(accountKey(account))
          const queues = streams.get(key) ?? new Set()
          queues.add(queue)
          streams.set(key, queues)
          open += 1
          return { key, queue }
        }),
        ({ key, queue }) =>
          Effect.sync(() => {
            open -= 1
            const queues = streams.get(key)
            queues?.delete(queue)
            if (queues?.size === 0) streams.delete(key)
          })
      ).pipe(Effect.map(({ queue }) => queue))

    return { subscribe } as const
  })
}) {}
