import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Redis as IORedis } from "ioredis"
import { luaScript } from "../src/Redis.js"
import { privateRedis } from "./support/privateRedis.js"

/**
 * Scripts run by their SHA1 and sent whole only when a server lacks them. A private server of
 * its own, since the test empties its script cache.
 */

const connected = (url: string) =>
  Effect.acquireRelease(
    Effect.sync(() => new IORedis(url, { maxRetriesPerRequest: 1 })),
    (client) => Effect.promise(() => client.quit().catch(() => "OK"))
  )

const INCREMENT_BY = `return redis.call("INCRBY", KEYS[1], ARGV[1])`
const REFUSES = `return redis.error_reply("REFUSED by the script")`
const shaOf = async (client: IORedis, lua: string) => String(await client.script("LOAD", lua))
/** How many times the server ran `EVAL`, the command that carries a script's text. */
const evalsRun = async (client: IORedis) =>
  Number(/^cmdstat_eval:calls=(\d+)/m.exec(await client.info("commandstats"))?.[1] ?? 0)

describe("luaScript", () => {
  it.scopedLive(
    "a server without the script is sent it once; after that only its SHA1 goes",
    () =>
      Effect.gen(function*() {
        const redis = yield* privateRedis()
        const client = yield* connected(redis.url)
        const incrementBy = luaScript(INCREMENT_BY)
        const sha = yield* Effect.promise(() => shaOf(client, INCREMENT_BY))
        yield* Effect.promise(() => client.script("FLUSH"))
        expect(yield* Effect.promise(() => client.script("EXISTS", sha))).toEqual([0])

        expect(yield* Effect.promise(() => incrementBy(client, ["counter"], [2]))).toBe(2)
        // The fallback left the script on the server, where the next call finds it by its SHA1.
        expect(yield* Effect.promise(() => client.script("EXISTS", sha))).toEqual([1])
        expect(yield* Effect.promise(() => incrementBy(client, ["counter"], [3]))).toBe(5)

        // Emptied again behind its back (a restart, a flush): sent again, nothing lost or doubled.
        yield* Effect.promise(() => client.script("FLUSH"))
        expect(yield* Effect.promise(() => incrementBy(client, ["counter"], [4]))).toBe(9)
        expect(yield* Effect.promise(() => client.get("counter"))).toBe("9")
        // The text went twice, once per empty cache; the other call sent only the SHA1.
        expect(yield* Effect.promise(() => evalsRun(client))).toBe(2)
      }),
    { timeout: 30_000 }
  )

  it.scopedLive(
    "an error the script itself raises reaches the caller, and is not taken for a missing script",
    () =>
      Effect.gen(function*() {
        const redis = yield* privateRedis()
        const client = yield* connected(redis.url)
        const refuses = luaScript(REFUSES)
        for (const attempt of ["missing", "loaded"]) {
          const error = yield* Effect.flip(Effect.tryPromise(() => refuses(client, [], [])))
          expect(String(error.cause), attempt).toContain("REFUSED by the script")
        }
      }),
    { timeout: 30_000 }
  )
})
