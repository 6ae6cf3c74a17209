import { describe, expect, layer } from "@effect/vitest"
import { Queue, QueueEvents } from "bullmq"
import { Effect, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import { readFileSync } from "node:fs"
import path from "node:path"
import { ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import type { Account } from "../src/Domain/Account.js"
import * as Money from "../src/Domain/Money.js"
import { jobIdOf } from "../src/Settlement/Jobs.js"
import { Wallets } from "../src/Wallets.js"
import { childEnvironment } from "./support/childEnvironment.js"
import { privateRedis } from "./support/privateRedis.js"
import { serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { newAccount, TestSettlement } from "./support/TestSettlement.js"

/** The README's plain runner, `examples/plain-bullmq.mjs`, run as a runner runs it: its own process. */
const runPlainRunner = (env: Readonly<Record<string, string>>) =>
  Effect.async<{ readonly status: number | null; readonly stdout: string; readonly output: string }>((resume) => {
    const child = execFile(process.execPath, [path.join(ROOT, "examples/plain-bullmq.mjs")], {
      cwd: ROOT,
      env: childEnvironment(env),
      encoding: "utf8",
      timeout: 60_000
    }, (error, stdout, stderr) => {
      const status = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resume(Effect.succeed({ status, stdout, output: `${stdout}\n${stderr}` }))
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** The README's Redis user for runners (its `ACL SETUSER runner …` line), as words for ACL SETUSER. */
const runnerAcl = (): ReadonlyArray<string> => {
  const line = readFileSync(path.join(ROOT, "README.md"), "utf8").split("\n").find((text) =>
    text.startsWith("ACL SETUSER runner ")
  )
  return (line ?? "").split(/\s+/).slice(2)
}

/** A private Redis with the worker as `npm start` runs it on BullMQ's defaults (no prefix). */
const workerOnPrivateRedis = Effect.gen(function*() {
  const config = yield* AppConfig
  const redis = yield* privateRedis()
  const { SETTLEMENT_QUEUE_PREFIX: _ignored, ...environment } = serviceEnvironment(config, "plain-bullmq", {
    REDIS_URL: redis.url
  })
  const worker = yield* startService("worker", environment)
  const connection = new IORedis(redis.url, { maxRetriesPerRequest: null })
  const queue = new Queue("settlement", { connection })
  yield* Effect.addFinalizer(() =>
    Effect.promise(async () => {
      await queue.close()
      await connection.quit()
    })
  )
  yield* waitFor(
    "the worker takes jobs",
    Effect.promise(() => queue.getWorkers()).pipe(
      Effect.map((workers) => workers.length > 0 ? Option.some(true) : Option.none())
    ),
    { limit: "30 seconds", alive: [worker] }
  )
  return { redis, queue } as const
})

const reservedOf = (account: Account) =>
  Effect.flatMap(Wallets, (wallets) => wallets.get(account)).pipe(
    Effect.map((wallet) => Money.format(wallet.reserved_usd))
  )

/**
 * A session runner as the README shows it (D8): plain BullMQ, `new
 * Queue("settlement", { connection })` and nothing else, against the worker
 * as `npm start` runs it with no queue setting. BullMQ's default prefix is
 * shared by everyone on a Redis, so this file brings a Redis of its own.
 */
layer(TestSettlement(), { excludeTestServices: true, timeout: "120 seconds" })("plain BullMQ producers (D8)", (it) => {
  describe("with BullMQ's defaults", () => {
    it.scoped("reserve, spend and release reach the worker, each with its result; one key on two accounts applies twice", () =>
      Effect.gen(function*() {
        const config = yield* AppConfig
        const redis = yield* privateRedis()
        const { SETTLEMENT_QUEUE_PREFIX: _ignored, ...environment } = serviceEnvironment(config, "plain-bullmq", {
          REDIS_URL: redis.url
        })
        const worker = yield* startService("worker", environment)

        // As a runner writes it.
        const connection = new IORedis(redis.url, { maxRetriesPerRequest: null })
        const queue = new Queue("settlement", { connection })
        const events = new QueueEvents("settlement", { connection: { url: redis.url } })
        yield* Effect.addFinalizer(() =>
          Effect.promise(async () => {
            await events.close()
            await queue.close()
            await connection.quit()
          })
        )
        yield* waitFor(
          "the worker takes jobs",
          Effect.promise(() => queue.getWorkers()).pipe(
            Effect.map((workers) => workers.length > 0 ? Option.some(true) : Option.none())
          ),
          { limit: "30 seconds", alive: [worker] }
        )
        const options = { attempts: 10, backoff: { type: "exponential", delay: 500 } } as const
        const settle = (name: string, data: Record<string, string>) =>
          Effect.promise(async () => {
            const job = await queue.add(name, data, options)
            return (await job.waitUntilFinished(events, 30_000)) as { status: string; wallet: { reserved_usd: string } }
          })

        const account = yield* newAccount("10")
        const reserve = yield* settle("reserve", {
          account_id: account.id,
          session_id: "run-1",
          amount_usd: "2.50",
          idempotency_key: "run-1-reserve"
        })
        expect(reserve).toMatchObject({ status: "applied", wallet: { reserved_usd: "2.500000" } })
        const spend = yield* settle("spend", {
          account_id: account.id,
          session_id: "run-1",
          amount_usd: "1.25",
          idempotency_key: "run-1-spend"
        })
        expect(spend).toMatchObject({ status: "applied", wallet: { reserved_usd: "1.250000", spent_usd: "1.250000" } })
        const release = yield* settle("release", {
          account_id: account.id,
          session_id: "run-1",
          idempotency_key: "run-1-release"
        })
        expect(release).toMatchObject({ status: "applied", wallet: { reserved_usd: "0.000000" } })

        // Keys are per account: the same key on another account is another job, applied too.
        const other = yield* newAccount("10")
        const first = yield* settle("reserve", {
          account_id: account.id,
          session_id: "run-2",
          amount_usd: "1",
          idempotency_key: "shared-key"
        })
        const second = yield* settle("reserve", {
          account_id: other.id,
          session_id: "run-2",
          amount_usd: "3",
          idempotency_key: "shared-key"
        })
        expect(first).toMatchObject({ status: "applied", wallet: { owner_id: account.id, reserved_usd: "1.000000" } })
        expect(second).toMatchObject({ status: "applied", wallet: { owner_id: other.id, reserved_usd: "3.000000" } })
      }))
  })

  describe("the README's plain runner (examples/plain-bullmq.mjs)", () => {
    it.scoped("refuses a job id another job took first: neither the squatter's result nor its wallet is taken", () =>
      Effect.gen(function*() {
        const { queue, redis } = yield* workerOnPrivateRedis
        const victim = yield* newAccount("10")
        const squatter = yield* newAccount("10")
        const session = `squatted-${randomUUID()}`
        // Whoever writes the queue first adds a job of their own under the id the runner's reserve derives.
        const jobId = jobIdOf(victim.id, `${session}-reserve`)
        yield* Effect.promise(() =>
          queue.add("reserve", {
            account_id: squatter.id,
            session_id: "squat",
            amount_usd: "7",
            idempotency_key: "squat-key"
          }, { jobId })
        )
        yield* waitFor(
          "the squatter's job completes",
          Effect.map(
            Effect.promise(() => queue.getJob(jobId)),
            (job) => job?.finishedOn === undefined ? Option.none() : Option.some(job)
          ),
          { limit: "20 seconds" }
        )
        const run = yield* runPlainRunner({ REDIS_URL: redis.url, ACCOUNT_ID: victim.id, SESSION_ID: session })
        expect(run.status, run.output).not.toBe(0)
        expect(run.output).toContain(
          `job ${jobId} is another job (its account_id, amount_usd, idempotency_key, session_id differ): ` +
            "this reserve was not enqueued"
        )
        expect(run.stdout).not.toMatch(/^reserve /m)
        expect(yield* reservedOf(victim)).toBe("0.000000")
        expect(yield* reservedOf(squatter)).toBe("7.000000")
      }))

    it.scoped("runs as the README's Redis user for runners, which reaches the settlement queue's keys and nothing else", () =>
      Effect.gen(function*() {
        const { redis } = yield* workerOnPrivateRedis
        const acl = runnerAcl()
        expect(acl.slice(0, 2)).toEqual(["runner", "on"])
        const password = acl.find((word) => word.startsWith(">"))?.slice(1) ?? ""
        const admin = new IORedis(redis.url, { maxRetriesPerRequest: null })
        yield* Effect.addFinalizer(() => Effect.promise(() => admin.quit()))
        expect(yield* Effect.promise(() => admin.call("ACL", "SETUSER", ...acl))).toBe("OK")
        const runnerUrl = `redis://runner:${encodeURIComponent(password)}@127.0.0.1:${redis.port}`

        const account = yield* newAccount("10")
        const run = yield* runPlainRunner({ REDIS_URL: runnerUrl, ACCOUNT_ID: account.id, SESSION_ID: "acl-session" })
        expect(run.status, run.output).toBe(0)
        expect(run.stdout).toContain("reserve applied: reserved 5.000000")
        expect(run.stdout).toContain("release applied: reserved 0.000000")

        // Nothing beside the settlement queue: another queue's keys, the service's own, the whole database.
        const runner = new IORedis(runnerUrl, { maxRetriesPerRequest: 0 })
        yield* Effect.addFinalizer(() => Effect.promise(() => runner.quit()))
        const refusal = (command: () => Promise<unknown>) =>
          Effect.promise(() => command().then(() => "allowed", (error: unknown) => String(error)))
        for (
          const attempt of [
            () => runner.set("bull:settlement-housekeeping:meta", "x"),
            () => runner.del("bull:webhooks:1"),
            () => runner.get("sign-in:attempts"),
            () => runner.keys("*"),
            () => runner.flushall(),
            () => runner.call("ACL", "LIST"),
            () => runner.eval("return redis.call('SET', KEYS[1], 'x')", 1, "session:other")
          ]
        ) {
          expect(yield* refusal(attempt)).toMatch(/NOPERM/)
        }
      }))
  })
})
