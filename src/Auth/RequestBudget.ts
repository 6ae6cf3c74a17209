import { Clock, Effect } from "effect"
import { AppConfig } from "../Config.js"
import { RateLimited } from "../Domain/Errors.js"
import { luaScript, Redis } from "../Redis.js"

/** The name a refusal gives the budget, in `limit_name` (D1's `rate_limited`). */
export const REQUEST_BUDGET = "user_requests_per_second"

/** How long a request waits for Redis before it is let through uncounted. */
const ANSWER_WITHIN = "100 millis"

/** How long a refused request's answer is held at most. */
const HOLD_AT_MOST_MS = 1000

/** The users whose refusal this process remembers at most; past it, the oldest is forgotten. */
const REMEMBERED = 10_000

/**
 * One user's bucket, as GCRA keeps it: one key holding the theoretical arrival time (ms) of the
 * next request at the steady rate. KEYS: the user's key. ARGV: now (ms), the interval between
 * requests at the rate (ms), the burst. A request is let in while it would arrive no further
 * ahead of now than the burst's worth of intervals; then the time moves one interval on and 0
 * is answered. Otherwise nothing changes and the wait (ms) until one would be let in is answered.
 * One key, so the script is one Redis Cluster slot whatever the prefix.
 */
const takeScript = luaScript(`
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call("GET", KEYS[1]) or "0")
if tat < now then tat = now end
local next = tat + interval
local ahead = next - now
local allowed = interval * burst
if ahead > allowed then return math.ceil(ahead - allowed) end
redis.call("SET", KEYS[1], next, "PX", math.ceil(ahead) + 1000)
return 0
`)

/**
 * Each signed-in user's budget of requests (D15): a token bucket of `USER_REQUEST_BURST` that
 * refills at `USER_REQUESTS_PER_SECOND`, for the whole fleet in Redis, taken in one script after
 * the token is checked. Past it, 429 `rate_limited` with `Retry-After`, before the request does
 * anything. A refusal is remembered here until its wait ends, so a user hammering past the budget
 * costs this process no Redis call. Redis away or slow, the request goes through uncounted: the
 * budget guards other accounts' latency, and must not take the API down with Redis.
 */
export class RequestBudget extends Effect.Service<RequestBudget>()("Auth/RequestBudget", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis
    const { perSecond, burst } = (yield* AppConfig).requestBudget
    const interval = 1000 / perSecond
    /** Users refused, until when (ms): refused here without asking Redis again. */
    const refusedUntil = new Map<string, number>()

    const refusal = (waitMs: number) =>
      new RateLimited({
        detail: `Too many requests: each user may make ${perSecond} a second (bursts of up to ${burst}); ` +
          "wait before trying again.",
        retry_after_seconds: Math.max(1, Math.ceil(waitMs / 1000)),
        limit_name: REQUEST_BUDGET,
        limit: perSecond
      })

    const remember = (userId: string, until: number) => {
      if (refusedUntil.size >= REMEMBERED) {
        const oldest = refusedUntil.keys().next()
        if (oldest.done !== true) refusedUntil.delete(oldest.value)
      }
      refusedUntil.set(userId, until)
    }

    /**
     * The refusal of a user refused until `until`: answered once that has passed (a second at
     * most), so that a client looping past the budget sends about one request a second per loop
     * instead of as many as the API can refuse. Waiting costs a timer, not the CPU other accounts'
     * requests need; the answer still says to wait (`Retry-After`, at least 1 s).
     */
    const refused = (until: number, now: number) =>
      Effect.zipRight(
        Effect.sleep(Math.min(HOLD_AT_MOST_MS, Math.max(0, until - now))),
        Effect.fail(refusal(Math.max(0, until - now - HOLD_AT_MOST_MS)))
      )

    /** One request of the user, or 429 when the user is past the budget. */
    const take = (userId: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const until = refusedUntil.get(userId)
        if (until !== undefined) {
          if (until > now) return refused(until, now)
          refusedUntil.delete(userId)
        }
        return Effect.tryPromise(() =>
          takeScript(redis.client, [redis.key("requests", userId)], [now, interval, burst])
        ).pipe(
          Effect.timeout(ANSWER_WITHIN),
          Effect.map(Number),
          // Uncounted rather than refused: see the class's comment.
          Effect.orElseSucceed(() => 0),
          Effect.flatMap((waitMs) => {
            if (waitMs <= 0) return Effect.void
            // Refused for the whole second Retry-After names, not only until the next token.
            const refusedTill = now + Math.ceil(waitMs / 1000) * 1000
            remember(userId, refusedTill)
            return refused(refusedTill, now)
          })
        )
      })

    return { take } as const
  }),
  dependencies: [Redis.Default]
}) {}
