import type { Job } from "bullmq"
import { Clock, Effect } from "effect"
import { AppConfig } from "../Config.js"
import { DELIVERY_TIMEOUT_MS } from "../Domain/Webhooks.js"
import { luaScript, Redis } from "../Redis.js"

/**
 * How long a delivery's place lasts unless given back: its 10 s answer and a margin for the
 * endpoint's read and the attempt's write. A worker that dies holding places loses them after this.
 */
const LEASE_MS = DELIVERY_TIMEOUT_MS + 5_000

/** A job's first wait at a bound; it doubles with each wait after. */
const FIRST_WAIT_MS = 100

/**
 * KEYS: the account's places, the endpoint's places (sorted sets: the job id, scored by when its
 * lease ends). ARGV: now (ms), the lease (ms), the job id, the account's bound, the endpoint's bound.
 * Drops lapsed leases. A job that holds a place (taken up again after its worker died) renews it;
 * otherwise it takes one in both, when both are under their bound. Returns 1 when it holds them,
 * 0 (and takes nothing) when either is full.
 */
const takeScript = luaScript(`
local now = tonumber(ARGV[1])
local ends = now + tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], ARGV[3]) then
  if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[4]) or redis.call("ZCARD", KEYS[2]) >= tonumber(ARGV[5]) then
    return 0
  end
end
for _, key in ipairs(KEYS) do
  redis.call("ZADD", key, ends, ARGV[3])
  redis.call("PEXPIRE", key, ARGV[2])
end
return 1
`)

/** A delivery's claim: the job, its endpoint and the endpoint's account (`kind:id`). */
export interface Place {
  readonly job: string
  readonly endpoint: string
  readonly account: string
}

/**
 * How long a job at a bound waits in the queue before it is tried again: 100 ms doubling with each
 * wait, up to the delivery timeout (a place held by an endpoint that never answers frees within
 * it), times 0.5–1 at random so the waiting jobs spread out. Waits are the job's starts that were
 * not attempts (`attemptsStarted` counts every time a worker took it).
 */
export const waitAtBound = (job: Pick<Job, "attemptsStarted" | "attemptsMade">, random = Math.random) => {
  const waits = Math.max(0, job.attemptsStarted - job.attemptsMade - 1)
  const full = Math.min(FIRST_WAIT_MS * 2 ** Math.min(waits, 20), DELIVERY_TIMEOUT_MS)
  return Math.round(full * (0.5 + random() / 2))
}

/**
 * Deliveries in flight, bounded per account and per endpoint across every worker (D17), so one
 * account's endpoints that never answer hold a few of the workers' slots, not all of them. Places are
 * leases in Redis, taken in one script (both keys share a hash tag: one slot on a cluster, D18).
 */
export class DeliveriesInFlight extends Effect.Service<DeliveriesInFlight>()("Webhooks/DeliveriesInFlight", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis
    const { inFlightPerAccount, inFlightPerEndpoint } = (yield* AppConfig).webhooks
    const keys = (place: Place) => ({
      account: redis.key("{webhook-in-flight}", "account", place.account),
      endpoint: redis.key("{webhook-in-flight}", "endpoint", place.endpoint)
    })

    /**
     * Takes the place, or answers false when the account or the endpoint is at its bound. Redis
     * unreachable, the delivery goes on without one: a counter never holds back a delivery (the
     * queue itself, on the same Redis, stops them when it is down for good).
     */
    const take = (place: Place) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.tryPromise(() => {
          const { account, endpoint } = keys(place)
          return takeScript(redis.client, [account, endpoint], [
            now,
            LEASE_MS,
            place.job,
            inFlightPerAccount,
            inFlightPerEndpoint
          ])
        })).pipe(
          Effect.map((taken) => Number(taken) === 1),
          Effect.catchAll((error) =>
            Effect.as(Effect.logWarning("webhook in-flight bound unchecked: Redis did not answer", error), true)
          )
        )

    /** Gives the place back; if Redis does not answer, its lease lapses by itself. */
    const give = (place: Place) => {
      const { account, endpoint } = keys(place)
      return Effect.ignore(
        Effect.tryPromise(() => redis.client.multi().zrem(account, place.job).zrem(endpoint, place.job).exec())
      )
    }

    /** A place held for the scope, given back when it closes; false (nothing held) at a bound. */
    const hold = (place: Place) =>
      Effect.acquireRelease(take(place), (taken) => taken ? give(place) : Effect.void).pipe(
        Effect.withSpan("DeliveriesInFlight.hold")
      )

    return { hold } as const
  }),
  dependencies: [Redis.Default]
}) {}
