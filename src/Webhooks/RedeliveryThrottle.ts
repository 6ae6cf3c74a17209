import { Clock, Effect } from "effect"
import { randomUUID } from "node:crypto"
import { AppConfig } from "../Config.js"
import { type Account, accountKey } from "../Domain/Account.js"
import { RateLimited, Unavailable } from "../Domain/Errors.js"
import { luaScript, Redis } from "../Redis.js"

const WINDOW_MS = 60_000

/**
 * KEYS: the account's redeliveries (a sorted set, one member a call, scored by its time).
 * ARGV: now (ms), the window (ms), the call's member, the limit.
 * Drops calls older than the window. At the limit, returns how long until the oldest leaves it and
 * adds nothing; otherwise adds the call and returns 0.
 */
const takeScript = luaScript(`
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now - window)
if redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[4]) then
  local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
  return math.max(tonumber(oldest[2]) + window - now, 1)
end
redis.call("ZADD", KEYS[1], now, ARGV[3])
redis.call("PEXPIRE", KEYS[1], window)
return 0
`)

/**
 * Redeliveries per account per sliding minute (D17): each queues the event to every matching
 * endpoint again, so without a bound one account could fill the delivery queue at will. Counted
 * in Redis, as sign-ins are, so every API process shares the count.
 */
export class RedeliveryThrottle extends Effect.Service<RedeliveryThrottle>()("Webhooks/RedeliveryThrottle", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis
    const limit = (yield* AppConfig).webhooks.redeliveriesPerMinute

    /** Counts a call of the account, or fails `rate_limited` (and counts nothing) at the limit. */
    const take = Effect.fn("RedeliveryThrottle.take")(function*(account: Account) {
      const now = yield* Clock.currentTimeMillis
      const { account_kind, account_id } = accountKey(account)
      const key = redis.key("{redeliveries}", account_kind, account_id)
      const wait = Number(
        yield* Effect.tryPromise({
          try: () => takeScript(redis.client, [key], [now, WINDOW_MS, `${now}:${randomUUID()}`, limit]),
          catch: () =>
            new Unavailable({ detail: "Redelivery is temporarily unavailable; retry shortly.", retry_after_seconds: 1 })
        })
      )
      if (wait > 0) {
        return yield* new RateLimited({
          detail: `At most ${limit} redeliveries a minute per account; wait before asking again.`,
          retry_after_seconds: Math.max(1, Math.ceil(wait / 1000))
        })
      }
    })

    return { take } as const
  }),
  dependencies: [Redis.Default]
}) {}
