import { SqlClient } from "@effect/sql"
import { expect, it as vitestIt, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { execFile } from "node:child_process"
import { randomUUID } from "node:crypto"
import { programCommand, ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { childEnvironment } from "./support/childEnvironment.js"
import { serverUrl } from "./support/databases.js"
import { pgbouncerInstalled, privatePgbouncer } from "./support/privatePgbouncer.js"
import {
  exitWithin,
  freePort,
  readyzAnswers,
  serviceEnvironment,
  settlementQueue,
  startService,
  waitFor
} from "./support/processes.js"
import {
  allFinished,
  distinctJobs,
  expectBooksMatch,
  QUICK_RECOVERY,
  workerCount,
  workload
} from "./support/settlementLoad.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * D18: PgBouncer in transaction pooling mode in front of PostgreSQL. The API and two workers
 * run with DATABASE_URL on the pooler and DATABASE_DIRECT_URL on PostgreSQL (LISTEN and the
 * migrations only); sign-in and revocation, idempotent wallet writes, settlement and the books
 * hold as without it. Without DATABASE_DIRECT_URL the API refuses to start, saying what to set.
 */

class Pooler extends Context.Tag("test/Pooler")<Pooler, {
  /** The file's database through PgBouncer. */
  readonly pooledUrl: string
  readonly directUrl: string
  /** PgBouncer's log so far. */
  readonly log: () => string
}>() {}

const PoolerLive = Layer.scoped(
  Pooler,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const directUrl = Redacted.value(config.databaseUrl)
    const bouncer = yield* privatePgbouncer(serverUrl(), [new URL(directUrl).username, "postgres"])
    return { pooledUrl: bouncer.pooled(directUrl), directUrl, log: bouncer.log }
  })
)

const TestPooler = PoolerLive.pipe(
  Layer.provideMerge(ProcessTestDatabase())
)

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: Record<string, unknown>
}

const request = (port: number, method: string, path: string, options: { body?: unknown; token?: string } = {}) =>
  Effect.promise(async (): Promise<Answer> => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        ...(options.body === undefined ? {} : { "content-type": "application/json" }),
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` })
      },
      ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      signal: AbortSignal.timeout(10_000)
    })
    const text = await response.text()
    return {
      status: response.status,
      headers: response.headers,
      body: text === "" ? {} : JSON.parse(text) as Record<string, unknown>
    }
  })

const signIn = (port: number, email: string) =>
  Effect.map(request(port, "POST", "/auth/login", { body: { email, password: PASSWORD } }), (answer) => {
    expect(answer.status).toBe(200)
    return String(answer.body.access_token)
  })

/** `npm run --silent cli -- ledger verify` with the given database settings. */
const ledgerVerify = (env: Readonly<Record<string, string>>) =>
  Effect.async<{ readonly status: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    const [file, args] = programCommand("cli", { args: ["ledger", "verify"] })
    execFile(file, args, {
      cwd: ROOT,
      encoding: "utf8",
      env: childEnvironment({ LOG_LEVEL: "warning", ...env })
    }, (
      error,
      stdout,
      stderr
    ) => {
      resume(
        Effect.succeed({
          status: error === null ? 0 : typeof error.code === "number" ? error.code : -1,
          stdout,
          stderr
        })
      )
    })
  })

if (!pgbouncerInstalled) {
  vitestIt.skip(
    "SKIPPED: /usr/sbin/pgbouncer is not installed; install Debian's `pgbouncer` package (`bash scripts/ci-prerequisites.sh` as root)",
    () => {}
  )
} else {
  layer(TestPooler, { excludeTestServices: true, timeout: "180 seconds" })(
    "behind PgBouncer in transaction mode (D18)",
    (it) => {
      it.scoped(
        "the API and two workers on the pooler: sign-in and revocation, idempotent wallet writes, settlement, the books",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const { directUrl, log, pooledUrl } = yield* Pooler
            const prefix = `${config.redisPrefix}:pooled`
            const environment = serviceEnvironment(config, prefix, {
              ...QUICK_RECOVERY,
              DATABASE_URL: pooledUrl,
              DATABASE_DIRECT_URL: directUrl
            })
            const port = yield* freePort
            const api = yield* startService("api", { ...environment, PORT: String(port) })
            const workers = [yield* startService("worker", environment), yield* startService("worker", environment)]
            yield* readyzAnswers(port, api)
            const queue = yield* settlementQueue(config, prefix)
            yield* waitFor("both workers take jobs", workerCount(queue, 2), { limit: "30 seconds", alive: workers })

            // Sign-in and revocation: a logout, and a session ended by another writer, heard over LISTEN.
            const admin = yield* createUser({ admin: true })
            const [first, second] = [yield* signIn(port, admin.email), yield* signIn(port, admin.email)]
            expect((yield* request(port, "GET", "/auth/me", { token: first })).status).toBe(200)
            expect((yield* request(port, "GET", "/auth/me", { token: second })).status).toBe(200)
            expect((yield* request(port, "POST", "/auth/logout", { token: first })).status).toBe(204)
            expect((yield* request(port, "GET", "/auth/me", { token: first })).status).toBe(401)
            const sql = yield* SqlClient.SqlClient
            yield* sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${admin.id} AND revoked_at IS NULL`
            yield* waitFor(
              "the session ended in the database is refused",
              Effect.map(
                request(port, "GET", "/auth/me", { token: second }),
                (answer) => answer.status === 401 ? Option.some(true) : Option.none()
              ),
              { limit: "10 seconds", alive: [api] }
            )

            // Wallet writes with idempotency.
            const token = yield* signIn(port, admin.email)
            const budget = { budget_usd: "250", idempotency_key: randomUUID() }
            const set = yield* request(port, "PUT", "/developer/account/wallet", { body: budget, token })
            expect(set.status).toBe(200)
            expect(set.body).toMatchObject({ budget_usd: "250.000000", version: 1 })
            const replayed = yield* request(port, "PUT", "/developer/account/wallet", { body: budget, token })
            expect(replayed.status).toBe(200)
            expect(replayed.headers.get("idempotent-replayed")).toBe("true")
            expect(replayed.body).toEqual(set.body)
            const credit = { amount_usd: "5", idempotency_key: randomUUID() }
            const credited = yield* request(port, "POST", "/developer/account/wallet/credits", { body: credit, token })
            expect(credited.body).toMatchObject({ budget_usd: "255.000000", version: 2 })
            const reused = yield* request(port, "POST", "/developer/account/wallet/credits", {
              body: { ...credit, amount_usd: "6" },
              token
            })
            expect(reused.status).toBe(422)
            expect(reused.body).toMatchObject({ code: "idempotency_key_reused" })
            const ledger = yield* request(port, "GET", "/developer/account/wallet/ledger", { token })
            expect((ledger.body.entries as Array<unknown>).length).toBe(2)

            // Settlement with two workers.
            const accounts = [yield* newAccount("100000"), yield* newAccount("100000"), yield* newAccount()]
            const jobs = workload(accounts, 400, 20_261_127)
            yield* Effect.promise(() => queue.addBulk([...jobs]))
            const { completed, failed } = yield* waitFor(
              "every job has finished",
              allFinished(queue, distinctJobs(jobs)),
              {
                limit: "90 seconds",
                every: "250 millis",
                alive: workers
              }
            )
            expect(failed).toEqual([])
            expect(new Set(completed.map((job) => job.processedBy)).size).toBe(2)
            yield* expectBooksMatch(accounts, completed, jobs)

            // The books, checked by the operator CLI through the pooler.
            const verified = yield* ledgerVerify({ DATABASE_URL: pooledUrl, DATABASE_DIRECT_URL: directUrl })
            expect(verified.status, verified.stderr).toBe(0)
            const report = JSON.parse(verified.stdout) as {
              wallets: number
              entries: number
              mismatches: Array<unknown>
            }
            expect(report.mismatches).toEqual([])
            expect(report.wallets).toBeGreaterThanOrEqual(4)

            // The service's statements went through the pooler.
            const database = new URL(directUrl).pathname.slice(1)
            expect(log()).toContain(`login attempt: db=${database}`)

            for (const process of [api, ...workers]) process.signal("SIGTERM")
            for (const process of [api, ...workers]) {
              expect(yield* exitWithin(process, "15 seconds")).toEqual({ code: 0, signal: null })
            }
          }),
        120_000
      )

      it.scoped(
        "without DATABASE_DIRECT_URL the API refuses to start on the pooler, naming the setting",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const { pooledUrl } = yield* Pooler
            const port = yield* freePort
            const api = yield* startService("api", {
              ...serviceEnvironment(config, `${config.redisPrefix}:refused`, { DATABASE_URL: pooledUrl }),
              PORT: String(port)
            })
            const exited = yield* exitWithin(api, "30 seconds")
            expect(exited.code).not.toBe(0)
            expect(api.output()).toContain("set DATABASE_DIRECT_URL to PostgreSQL itself")
            // One line, as every start-up failure (D9).
            const lines = api.output().split("\n").filter((line) => line.includes("DATABASE_DIRECT_URL"))
            expect(lines).toHaveLength(1)
            expect(JSON.parse(lines[0] ?? "{}")).toMatchObject({ level: "error", service: "api" })
          }),
        60_000
      )

      it.scoped(
        "without DATABASE_DIRECT_URL the webhooks process starts on the pooler all the same, its relay on its sweep alone",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const { pooledUrl } = yield* Pooler
            const webhooks = yield* startService("webhooks", {
              ...serviceEnvironment(config, `${config.redisPrefix}:sweeping`, { DATABASE_URL: pooledUrl }),
              LOG_LEVEL: "info"
            })
            yield* waitFor(
              "the process delivers webhooks and its relay has started",
              Effect.sync(() =>
                ["webhook delivery worker started", "webhook relay started"].every((line) =>
                    webhooks.output().includes(line)
                  )
                  ? Option.some(true)
                  : Option.none()
              ),
              { limit: "30 seconds", alive: [webhooks] }
            )
            const lines = webhooks.output().split("\n").filter((line) =>
              line.includes("webhook relay: no notifications")
            )
            expect(lines, webhooks.output()).toHaveLength(1)
            expect(JSON.parse(lines[0] ?? "{}")).toMatchObject({ level: "warn", service: "webhooks" })
            webhooks.signal("SIGTERM")
            expect(yield* exitWithin(webhooks, "15 seconds")).toEqual({ code: 0, signal: null })
          }),
        60_000
      )
    }
  )
}
