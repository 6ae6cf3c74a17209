import { Clock, Effect } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { RateLimited, Unavailable } from "../Domain/Errors.js"
import { Redis } from "../Redis.js"

const WINDOW_MS = 15 * 60 * 1000

/** Failed sign-ins allowed per sliding 15 minutes, by what they are counted against (D2). */
const LIMITS = { emailAddress: 5, email: 20, address: 100 } as const
type Counter = keyof typeof LIMITS

/** An attempt taken from the counters, to give back unless it turns out a failure. */
export interface Attempt {
  readonly email: string
  readonly address: string
  readonly member: string
}

/**
 * KEYS: one sorted set per counter. ARGV: now (ms), window (ms), the attempt's
 * member, then each counter's limit. Drops entries older than the window; if
 * any counter is at its limit, returns how long until its oldest entry leaves
 * the window and adds nothing; otherwise adds the attempt to every counter and
 * returns 0.
 */
const TAKE_SCRIPT = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call("ZREMRANGEBYSCORE", key, 0, now - window)
  if redis.call("ZCARD", key) >= tonumber(ARGV[3 + i]) then
    local oldest = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
    wait = math.max(wait, tonumber(oldest[2]) + window - now, 1)
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call("ZADD", key, now, ARGV[3])
  redis.call("PEXPIRE", key, window)
end
return 0
`

const digest = (value: string) => createHash("sha256").update(value).digest("base64url").slice(0, 22)

/**
 * Brute-force protection without victim lock-out: failures are counted per
 * (email, address), per email and per address in Redis sorted sets (one member
 * per failure, scored by time), so the window slides. Emails are hashed: no
 * address book in Redis.
 */
export class LoginThrottle extends Effect.Service<LoginThrottle>()("Auth/LoginThrottle", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis

    /** `email` arrives in its one spelling (`normalizeEmail`). */
    const keys = (email: string, address: string): Record<Counter, string> => ({
      emailAddress: redis.key("login-failures", "ea", digest(`${email}\n${address}`)),
      email: redis.key("login-failures", "e", digest(email)),
      address: redis.key("login-failures", "a", digest(address))
    })

    const unavailable = () =>
      new Unavailable({ detail: "Sign-in is temporarily unavailable; retry shortly.", retry_after_seconds: 1 })

    const run = <A>(command: () => Promise<A>) => Effect.tryPromise({ try: command, catch: unavailable })

    const counters = Object.keys(LIMITS) as Array<Counter>

    /**
     * Takes a sign-in attempt before the password is checked (D2): every
     * counter at once, in one script, so parallel attempts cannot all pass a
     * check made before any of them was counted. An attempt is counted as a
     * failure up front; `giveBack` returns it when it was not one.
     */
    const take = Effect.fn("LoginThrottle.take")(function*(email: string, address: string) {
      const now = yield* Clock.currentTimeMillis
      const member = `${now}:${randomUUID()}`
      const byCounter = keys(email, address)
      const retryAfterMs = yield* run(() =>
        redis.client.eval(
          TAKE_SCRIPT,
          counters.length,
          ...counters.map((counter) => byCounter[counter]),
          now,
          WINDOW_MS,
          member,
          ...counters.map((counter) => LIMITS[counter])
        )
      )
      if (Number(retryAfterMs) > 0) {
        return yield* new RateLimited({
          detail: "Too many failed sign-ins; wait before trying again.",
          retry_after_seconds: Math.max(1, Math.ceil(Number(retryAfterMs) / 1000))
        })
      }
      return { email, address, member } satisfies Attempt
    })

    /**
     * The attempt was not a failed sign-in (it succeeded, or could not be
     * decided): it no longer counts. A success also clears its (email,
     * address) counter, and only that one: an attacker elsewhere gains nothing.
     */
    const giveBack = Effect.fn("LoginThrottle.giveBack")(function*(attempt: Attempt, succeeded: boolean) {
      const byCounter = keys(attempt.email, attempt.address)
      const pipeline = redis.client.multi()
      for (const counter of counters) pipeline.zrem(byCounter[counter], attempt.member)
      if (succeeded) pipeline.del(byCounter.emailAddress)
      yield* run(() => pipeline.exec())
    })

    return { take, giveBack } as const
  }),
  dependencies: [Redis.Default]
}) {}
