import { Effect } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { RateLimited, Unavailable } from "../Domain/Errors.js"
import { Redis } from "../Redis.js"

const WINDOW_MS = 15 * 60 * 1000

/** Failed sign-ins allowed per sliding 15 minutes, by what they are counted against (D2). */
const LIMITS = { emailAddress: 5, email: 20, address: 100 } as const
type Counter = keyof typeof LIMITS

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

    const keys = (email: string, address: string): Record<Counter, string> => {
      const normalised = email.toLowerCase()
      return {
        emailAddress: redis.key("login-failures", "ea", digest(`${normalised}\n${address}`)),
        email: redis.key("login-failures", "e", digest(normalised)),
        address: redis.key("login-failures", "a", digest(address))
      }
    }

    const unavailable = () =>
      new Unavailable({ detail: "Sign-in is temporarily unavailable; retry shortly.", retry_after_seconds: 1 })

    const run = <A>(command: () => Promise<A>) =>
      Effect.tryPromise({ try: command, catch: unavailable })

    /** Fails with 429 when any counter is at its limit; checked before the password (D2). */
    const check = Effect.fn("LoginThrottle.check")(function*(email: string, address: string) {
      const now = Date.now()
      const byCounter = keys(email, address)
      const counters = Object.keys(LIMITS) as Array<Counter>
      const pipeline = redis.client.multi()
      for (const counter of counters) {
        pipeline.zremrangebyscore(byCounter[counter], 0, now - WINDOW_MS)
        pipeline.zcard(byCounter[counter])
        pipeline.zrange(byCounter[counter], 0, 0, "WITHSCORES")
      }
      const results = yield* run(() => pipeline.exec())
      if (results === null) return yield* unavailable()
      let retryAfterMs = 0
      counters.forEach((counter, index) => {
        const count = Number(results[index * 3 + 1]?.[1] ?? 0)
        const oldest = results[index * 3 + 2]?.[1]
        if (count >= LIMITS[counter] && Array.isArray(oldest) && oldest.length === 2) {
          retryAfterMs = Math.max(retryAfterMs, Number(oldest[1]) + WINDOW_MS - now)
        }
      })
      if (retryAfterMs > 0) {
        return yield* new RateLimited({
          detail: "Too many failed sign-ins; wait before trying again.",
          retry_after_seconds: Math.max(1, Math.ceil(retryAfterMs / 1000))
        })
      }
    })

    const recordFailure = Effect.fn("LoginThrottle.recordFailure")(function*(email: string, address: string) {
      const now = Date.now()
      const member = `${now}:${randomUUID()}`
      const pipeline = redis.client.multi()
      for (const key of Object.values(keys(email, address))) {
        pipeline.zadd(key, now, member)
        pipeline.pexpire(key, WINDOW_MS)
      }
      yield* run(() => pipeline.exec())
    })

    /** A success clears the (email, address) counter only: an attacker elsewhere gains nothing. */
    const recordSuccess = Effect.fn("LoginThrottle.recordSuccess")(function*(email: string, address: string) {
      yield* run(() => redis.client.del(keys(email, address).emailAddress))
    })

    return { check, recordFailure, recordSuccess } as const
  }),
  dependencies: [Redis.Default]
}) {}
