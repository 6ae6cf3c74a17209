import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Logger, Option } from "effect"
import { SettlementProducer } from "../src/Settlement/Producer.js"
import { privateRedis } from "./support/privateRedis.js"
import { waitFor } from "./support/processes.js"
import { TestConfig } from "./support/TestApp.js"

/**
 * The typed producer while its Redis goes away and comes back (a Redis of the test's own,
 * stopped and started again): one log line when the outage starts and one when it ends, and no
 * raw stack trace per reconnect of its queue or its result listener.
 */

interface Line {
  readonly level: string
  readonly message: string
}

describe("the typed producer while Redis is away (D9)", () => {
  it.scopedLive(
    "logs one line per outage and its end, and writes no stack trace to the console",
    () =>
      Effect.gen(function*() {
        const redis = yield* privateRedis()
        const logs: Array<Line> = []
        const capture = Logger.replace(
          Logger.defaultLogger,
          Logger.make(({ logLevel, message }) => {
            logs.push({ level: logLevel.label, message: Array.isArray(message) ? message.join(" ") : String(message) })
          })
        )
        // Built in this scope: its queue and result listener connect to the private Redis, and log through `capture`.
        yield* Layer.build(
          SettlementProducer.Default.pipe(Layer.provide(TestConfig({ REDIS_URL: redis.url })), Layer.provide(capture))
        )

        // What BullMQ and ioredis print themselves goes to the console: counted from here on.
        const printed: Array<string> = []
        const write = process.stderr.write.bind(process.stderr)
        const consoleError = console.error
        const consoleWarn = console.warn
        const record = (...args: ReadonlyArray<unknown>) => {
          printed.push(args.map((arg) => arg instanceof Error ? arg.stack ?? arg.message : String(arg)).join(" "))
        }
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            process.stderr.write = ((chunk: string | Uint8Array) => {
              printed.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"))
              return true
            }) as typeof process.stderr.write
            console.error = record
            console.warn = record
          }),
          () =>
            Effect.sync(() => {
              process.stderr.write = write
              console.error = consoleError
              console.warn = consoleWarn
            })
        )

        yield* redis.stop
        // Long enough for several reconnect attempts of every connection (ioredis retries within 2 s).
        yield* Effect.sleep("6 seconds")
        yield* redis.start
        yield* waitFor(
          "the producer logs that Redis is back",
          Effect.sync(() =>
            logs.some((line) => /reachable again/.test(line.message)) ? Option.some(true) : Option.none()
          ),
          { limit: "30 seconds" }
        )
        // The connections that reconnect a moment later belong to the same outage.
        yield* Effect.sleep("2 seconds")

        const stackFrames = printed.flatMap((text) => text.split("\n")).filter((line) => /^\s+at /.test(line))
        expect(stackFrames).toEqual([])
        expect(printed.filter((text) => /error/i.test(text))).toEqual([])
        expect(logs.filter((line) => /unreachable/.test(line.message))).toEqual([
          { level: "ERROR", message: expect.stringContaining("the queue's Redis is unreachable; retrying") }
        ])
        expect(logs.filter((line) => /reachable again/.test(line.message))).toHaveLength(1)
        expect(logs.filter((line) => line.level === "WARN" || line.level === "ERROR")).toHaveLength(1)
      }),
    { timeout: 90_000 }
  )
})
