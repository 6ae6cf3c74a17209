import { Clock, Duration, Effect } from "effect"
import { createHash, randomUUID } from "node:crypto"
import { isIP } from "node:net"
import { AppConfig } from "../Config.js"
import { RateLimited, Unavailable } from "../Domain/Errors.js"
import { luaScript, Redis } from "../Redis.js"

const WINDOW_MS = 15 * 60 * 1000

/** Failed sign-ins allowed per sliding 15 minutes, by what they are counted against (D2). */
const FAILURES = { emailAddress: 5, email: 20, address: 100 } as const
type Counter = "emailAddress" | "email" | "address" | "signInsEmail" | "signInsAddress"
/** The script's order of keys and limits. */
const COUNTERS: ReadonlyArray<Counter> = ["emailAddress", "email", "signInsEmail", "signInsAddress", "address"]

/** An attempt taken from the counters, to give back unless it turns out a failure. */
export interface Attempt {
  /** The counters' keys, for the email and the address as counted. */
  readonly keys: Readonly<Record<Counter, string>>
  readonly member: string
  /**
   * The address alone is at its failure limit: the attempt is let through slowly (issue 22.4),
   * and only a right password for a user that exists gets in.
   */
  readonly slowed: boolean
  /** For a slowed attempt, how long until the address's oldest failure leaves the window. */
  readonly addressWaitMs: number
}

/**
 * KEYS: one sorted set per counter, in `COUNTERS`' order: failures per (email, address), per
 * email, sign-ins per email, sign-ins per address (successes too), and last failures per address.
 * ARGV: now (ms), window (ms), the attempt's member, then each counter's limit.
 * Drops entries older than the window. If any of the first four is at its limit, returns how
 * long until its oldest entry leaves the window and adds nothing. Otherwise adds the attempt to
 * every counter (to the address's failures only while under its limit) and returns 0, or, when
 * the address's failures alone are at their limit, minus the wait that limit would have imposed.
 */
const takeScript = luaScript(`
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local function wait_of(i)
  local key = KEYS[i]
  redis.call("ZREMRANGEBYSCORE", key, 0, now - window)
  if redis.call("ZCARD", key) < tonumber(ARGV[3 + i]) then return 0 end
  local oldest = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  return math.max(tonumber(oldest[2]) + window - now, 1)
end
local wait = 0
for i = 1, 4 do wait = math.max(wait, wait_of(i)) end
if wait > 0 then return wait end
local address_wait = wait_of(5)
for i, key in ipairs(KEYS) do
  if i < 5 or address_wait == 0 then
    redis.call("ZADD", key, now, ARGV[3])
    redis.call("PEXPIRE", key, window)
  end
end
return -address_wait
`)

/**
 * What one address counts as: IPv6 by its /64 (one subscriber's network: a client picks a new
 * address within it at will), IPv4 as itself.
 */
export const countedAs = (address: string): string => {
  if (isIP(address) !== 6) return address
  const [head = "", tail = ""] = address.toLowerCase().split("::")
  const left = head === "" ? [] : head.split(":")
  const right = tail === "" ? [] : tail.split(":")
  const groups = address.includes("::")
    ? [...left, ...Array.from({ length: 8 - left.length - right.length }, () => "0"), ...right]
    : left
  return `${groups.slice(0, 4).map((group) => group.replace(/^0+(?=.)/, "")).join(":")}::/64`
}

/** How long an attempt from an address at its failure limit waits before its password is checked (issue 22.4). */
const SLOW_DOWN = Duration.seconds(1)

const digest = (value: string) => createHash("sha256").update(value).digest("base64url").slice(0, 22)

/**
 * Brute-force protection without victim lock-out: failures are counted per
 * (email, address), per email and per address, and sign-ins of any outcome per
 * email and per address, in Redis sorted sets (one member per attempt, scored
 * by time), so the window slides. Emails and addresses are hashed: no address
 * book in Redis.
 */
export class LoginThrottle extends Effect.Service<LoginThrottle>()("Auth/LoginThrottle", {
  effect: Effect.gen(function*() {
    const redis = yield* Redis
    const config = yield* AppConfig
    const limits: Record<Counter, number> = {
      ...FAILURES,
      signInsEmail: config.signInsPerEmail,
      signInsAddress: config.signInsPerAddress
    }

    /**
     * `email` arrives in its one spelling (`normalizeEmail`), `address` as counted (`countedAs`).
     * Every key shares one hash tag, so the script's keys sit in one Redis Cluster slot (D18).
     */
    const keys = (email: string, address: string): Record<Counter, string> => {
      const ofEmail = digest(email)
      const ofAddress = digest(address)
      return {
        emailAddress: redis.key("{sign-in}", "failures", "ea", digest(`${email}\n${address}`)),
        email: redis.key("{sign-in}", "failures", "e", ofEmail),
        address: redis.key("{sign-in}", "failures", "a", ofAddress),
        signInsEmail: redis.key("{sign-in}", "all", "e", ofEmail),
        signInsAddress: redis.key("{sign-in}", "all", "a", ofAddress)
      }
    }

    const unavailable = () =>
      new Unavailable({ detail: "Sign-in is temporarily unavailable; retry shortly.", retry_after_seconds: 1 })

    const run = <A>(command: () => Promise<A>) => Effect.tryPromise({ try: command, catch: unavailable })

    /**
     * Takes a sign-in attempt before the password is checked (D2, issue 22.3): every counter at
     * once, in one script, so parallel attempts cannot all pass a check made before any of them
     * was counted. An attempt is counted as a failure up front; `giveBack` returns it when it was
     * not one. Sign-ins per email and per address count successes too, and stay counted.
     */
    const take = Effect.fn("LoginThrottle.take")(function*(email: string, clientAddress: string) {
      const now = yield* Clock.currentTimeMillis
      const member = `${now}:${randomUUID()}`
      const byCounter = keys(email, countedAs(clientAddress))
      const answer = Number(
        yield* run(() =>
          takeScript(
            redis.client,
            COUNTERS.map((counter) => byCounter[counter]),
            [now, WINDOW_MS, member, ...COUNTERS.map((counter) => limits[counter])]
          )
        )
      )
      if (answer > 0) {
        return yield* new RateLimited({
          detail: "Too many sign-ins; wait before trying again.",
          retry_after_seconds: Math.max(1, Math.ceil(answer / 1000))
        })
      }
      return { keys: byCounter, member, slowed: answer < 0, addressWaitMs: -answer } satisfies Attempt
    })

    /** What a slowed attempt whose password was wrong is told: the address's wait (D2). */
    const refused = (attempt: Attempt) =>
      new RateLimited({
        detail: "Too many failed sign-ins from this address; wait before trying again.",
        retry_after_seconds: Math.max(1, Math.ceil(attempt.addressWaitMs / 1000))
      })

    /**
     * The attempt was not a failed sign-in (it succeeded, or could not be decided): it no
     * longer counts as a failure (it still counts as a sign-in). A success also clears its
     * (email, address) failures, and only those: an attacker elsewhere gains nothing.
     */
    const giveBack = Effect.fn("LoginThrottle.giveBack")(function*(attempt: Attempt, succeeded: boolean) {
      const pipeline = redis.client.multi()
      for (const counter of ["emailAddress", "email", "address"] as const) {
        pipeline.zrem(attempt.keys[counter], attempt.member)
      }
      if (succeeded) pipeline.del(attempt.keys.emailAddress)
      yield* run(() => pipeline.exec())
    })

    return { take, giveBack, refused, slowDown: SLOW_DOWN } as const
  }),
  dependencies: [Redis.Default]
}) {}
