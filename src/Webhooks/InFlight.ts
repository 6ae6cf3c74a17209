import type { Job } from "bullmq"
import { Clock, Effect, Option } from "effect"
import { AppConfig } from "../Config.js"
import { DELIVERY_TIMEOUT_MS } from "../Domain/Webhooks.js"
import { luaScript, Redis } from "../Redis.js"
import { WebhookQueue } from "./Queue.js"

/**
 * How long a delivery's place lasts unless given back: its 10 s answer and a margin for the
 * endpoint's read and the attempt's write. A worker that dies holding places loses them after this.
 */
const LEASE_MS = DELIVERY_TIMEOUT_MS + 5_000

/** A parked job's first wait, should no place given back wake it; it doubles with each wait after. */
const FIRST_WAIT_MS = 1_000

/** A parked job's entry outlives its longest wait, so entries of jobs gone elsewhere lapse. */
const PARKED_TTL_MS = 6 * DELIVERY_TIMEOUT_MS

/**
 * A job at a bound asks again this often, this many times, in its worker slot before it is parked:
 * a place of an endpoint that answers in milliseconds frees within that, one that hangs does not,
 * and a job parked costs the queue a round of moves.
 */
const ASK_AGAIN = { every: "25 millis", times: 5 } as const

/**
 * KEYS: the account's places, the endpoint's places (sorted sets: the job id, scored by when its
 * lease ends), the account's parked jobs, the endpoint's parked jobs (scored by when parked).
 * ARGV: now (ms), the lease (ms), the job id, the account's bound, the endpoint's bound, parked TTL
 * (ms), whether to park (1 or 0).
 * Drops lapsed leases. A job that holds a place (taken up again after its worker died) renews it.
 * Otherwise, with the endpoint or the account at its bound, 0 is returned, the job parked on that
 * one's list if asked; else it takes a place in both and 1 is returned. A job that holds is parked nowhere.
 */
const takeScript = luaScript(`
local now = tonumber(ARGV[1])
local ends = now + tonumber(ARGV[2])
local job = ARGV[3]
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], job) then
  local full = nil
  if redis.call("ZCARD", KEYS[2]) >= tonumber(ARGV[5]) then full = KEYS[4]
  elseif redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[4]) then full = KEYS[3] end
  if full then
    if ARGV[7] == "1" then
      redis.call("ZADD", full, "NX", now, job)
      redis.call("PEXPIRE", full, ARGV[6])
    end
    return 0
  end
end
for i = 1, 2 do
  redis.call("ZADD", KEYS[i], ends, job)
  redis.call("PEXPIRE", KEYS[i], ARGV[2])
  redis.call("ZREM", KEYS[i + 2], job)
end
return 1
`)

/**
 * KEYS: as the take's. ARGV: the job id.
 * Gives the job's places back and answers the parked job to wake for them: the endpoint's longest
 * parked first (the place freed is its endpoint's), else the account's; false when none waits.
 */
const giveScript = luaScript(`
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("ZREM", KEYS[2], ARGV[1])
for _, parked in ipairs({ KEYS[4], KEYS[3] }) do
  local first = redis.call("ZPOPMIN", parked)
  if first[1] then
    redis.call("ZREM", KEYS[3], first[1])
    return first[1]
  end
end
return false
`)

/** A delivery's claim: the job, its endpoint, the endpoint's account (`kind:id`), and how often the job was parked. */
export interface Place {
  readonly job: string
  readonly endpoint: string
  readonly account: string
  readonly parked: number
}

/** How often a job was parked: its starts that were not attempts (`attemptsStarted` counts every time a worker took it). */
export const timesParked = (job: Pick<Job, "attemptsStarted" | "attemptsMade">) =>
  Math.max(0, job.attemptsStarted - job.attemptsMade - 1)

/**
 * How long a parked job waits in the queue unless a place given back wakes it first: 1 s doubling
 * with each wait, up to the delivery timeout (a place held by an endpoint that never answers frees
 * within it), times 0.5–1 at random so the waiting jobs spread out.
 */
export const waitAtBound = (job: Pick<Job, "attemptsStarted" | "attemptsMade">, random = Math.random) => {
  const full = Math.min(FIRST_WAIT_MS * 2 ** Math.min(timesParked(job), 20), DELIVERY_TIMEOUT_MS)
  return Math.round(full * (0.5 + random() / 2))
}

/**
 * Deliveries in flight, bounded per account and per endpoint across every worker (D17), so one
 * account's endpoints that never answer hold a few of the workers' slots, not all of them. Places are
 * leases in Redis, taken in one script (all keys share a hash tag: one slot on a cluster, D18). A job
 * at a bound is parked: it waits in the queue as delayed, and a place given back wakes the longest
 * parked job of its endpoint (or account) at once, so a busy endpoint's places never sit idle.
 */
export class DeliveriesInFlight extends Effect.Service<DeliveriesInFlight>()("Webhooks/DeliveriesInFlight", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis
    const { queue } = yield* WebhookQueue
    const { inFlightPerAccount, inFlightPerEndpoint } = (yield* AppConfig).webhooks
    const keys = (place: Place) => [
      redis.key("{webhook-in-flight}", "places", "account", place.account),
      redis.key("{webhook-in-flight}", "places", "endpoint", place.endpoint),
      redis.key("{webhook-in-flight}", "parked", "account", place.account),
      redis.key("{webhook-in-flight}", "parked", "endpoint", place.endpoint)
    ]

    /**
     * Asks for the place: false when the account or the endpoint is at its bound (the job parked if
     * `park`). Redis unreachable, the delivery goes on without one: a counter never holds back a
     * delivery (the queue itself, on the same Redis, stops them when it is down for good).
     */
    const ask = (place: Place, park: boolean) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.tryPromise(() =>
          takeScript(redis.client, keys(place), [
            now,
            LEASE_MS,
            place.job,
            inFlightPerAccount,
            inFlightPerEndpoint,
            PARKED_TTL_MS,
            park ? 1 : 0
          ])
        )).pipe(
          Effect.map((taken) => Number(taken) === 1),
          Effect.catchAll((error) =>
            Effect.as(Effect.logWarning("webhook in-flight bound unchecked: Redis did not answer", error), true)
          )
        )

    // Jobs of this process asking again, by the endpoint and the account they wait on, oldest first:
    // a place given back here wakes one at once rather than at its next ask.
    const asking = new Map<string, Set<() => void>>()
    const waitOf = (place: Place) => [`endpoint:${place.endpoint}`, `account:${place.account}`]
    const freed = (place: Place) =>
      Effect.async<void>((resume) => {
        const wake = () => {
          for (const key of waitOf(place)) asking.get(key)?.delete(wake)
          resume(Effect.void)
        }
        for (const key of waitOf(place)) asking.set(key, (asking.get(key) ?? new Set()).add(wake))
        return Effect.sync(() => {
          for (const key of waitOf(place)) asking.get(key)?.delete(wake)
        })
      })
    const wakeOne = (place: Place) =>
      Effect.sync(() => {
        for (const key of waitOf(place)) {
          const [first] = asking.get(key) ?? []
          if (first !== undefined) return first()
          asking.delete(key)
        }
      })

    /**
     * Takes the place, asking again a few times in the slot on a job's first try (a job back from
     * parking asks once: jobs of an endpoint that hangs come back again and again, and must not
     * fill the slots asking); false once the job is parked.
     */
    const take = (place: Place) =>
      Effect.gen(function*() {
        for (let asked = 1; asked < (place.parked === 0 ? ASK_AGAIN.times : 1); asked++) {
          if (yield* ask(place, false)) return true
          yield* Effect.race(Effect.sleep(ASK_AGAIN.every), freed(place))
        }
        return yield* ask(place, true)
      })

    /**
     * Gives the place back and moves the parked job it wakes from delayed to waiting. A job not
     * delayed (yet, or any more) is left alone: its own wait brings it back. If Redis does not
     * answer, the lease lapses by itself.
     */
    const give = (place: Place) =>
      Effect.tryPromise(() => giveScript(redis.client, keys(place), [place.job])).pipe(
        Effect.zipLeft(wakeOne(place)),
        Effect.map((woken) => Option.liftPredicate(woken, (id): id is string => typeof id === "string")),
        Effect.flatMap(Option.match({
          onNone: () => Effect.void,
          onSome: (id) => Effect.tryPromise(() => queue.getJob(id).then((job) => job?.promote()))
        })),
        Effect.ignore
      )

    /**
     * A place held, and the effect that gives it back (once: the scope's end gives it back too, if
     * nothing did before); none (the job parked) at a bound.
     */
    const hold = Effect.fn("DeliveriesInFlight.hold")(function*(place: Place) {
      if (!(yield* take(place))) return Option.none()
      const giveOnce = yield* Effect.once(give(place))
      yield* Effect.addFinalizer(() => giveOnce)
      return Option.some(giveOnce)
    })

    return { hold } as const
  }),
  dependencies: [Redis.Default, WebhookQueue.Default]
}) {}
