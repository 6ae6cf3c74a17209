import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { execFile } from "node:child_process"
import { loadavg } from "node:os"
import { Accounts } from "../src/Accounts.js"
import { AppConfig } from "../src/Config.js"
import { UNBUDGETED } from "./support/budget.js"
import { type Child, freePort, readyzAnswers, serviceEnvironment, startService } from "./support/processes.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"

/**
 * Each signed-in user's request budget (D15): past it, 429 `rate_limited` with `Retry-After`,
 * and the request changes nothing; another user is not held to it. With the budget as shipped,
 * one member's eight loops of cheap reads leave another account's wallet reads within twice what
 * they take on an idle process. Real API processes over HTTP; the attacker is a process of its own.
 */

interface Api {
  readonly port: number
  readonly process: Child
}

class Apis extends Context.Tag("test/RequestBudget/Apis")<Apis, {
  /** A budget of 1 a second in bursts of 5, to reach it in a test. */
  readonly small: Api
  /** The budget as shipped (the settings unset). */
  readonly shipped: Api
}>() {}

const startApi = (name: string, settings: Readonly<Record<string, string>>) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const port = yield* freePort
    // The budget as shipped unless `settings` set it: without the test support's generous one.
    const environment = Object.fromEntries(
      Object.entries(serviceEnvironment(config, `${config.redisPrefix}:${name}`)).filter(([key]) =>
        !(key in UNBUDGETED)
      )
    )
    const process = yield* startService("api", { ...environment, ...settings, PORT: String(port) })
    yield* readyzAnswers(port, process)
    return { port, process } satisfies Api
  })

const ApisLive = Layer.scoped(
  Apis,
  Effect.all({
    small: startApi("small-budget", { USER_REQUESTS_PER_SECOND: "1", USER_REQUEST_BURST: "5" }),
    shipped: startApi("shipped-budget", {})
  }, { concurrency: "unbounded" })
)

const TestLayer = ApisLive.pipe(Layer.provideMerge(Accounts.Default.pipe(Layer.provideMerge(ProcessTestDatabase()))))

interface Reply {
  readonly status: number
  readonly retryAfter: string | null
  readonly body: Record<string, unknown> | undefined
}

const call = (api: Api, method: "GET" | "POST", path: string, token: string | undefined, body?: unknown) =>
  Effect.promise(async (): Promise<Reply> => {
    const response = await fetch(`http://127.0.0.1:${api.port}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      body: text === "" ? undefined : JSON.parse(text) as Record<string, unknown>
    }
  })

const signIn = (api: Api, email: string) =>
  Effect.map(call(api, "POST", "/auth/login", undefined, { email, password: PASSWORD }), (reply) => {
    expect(reply.status).toBe(200)
    return String(reply.body?.access_token)
  })

const quantile = (samples: ReadonlyArray<number>, q: number) => {
  const sorted = [...samples].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
}

/**
 * The victim account's wallet read one after another for `seconds`, 10 ms apart, by its members in
 * turn (each within its own budget, as a console is): p50 and p99 in ms.
 */
const walletReads = (api: Api, tokens: ReadonlyArray<string>, seconds: number) =>
  Effect.gen(function*() {
    const until = performance.now() + seconds * 1000
    const took: Array<number> = []
    for (let i = 0; performance.now() < until; i++) {
      const started = performance.now()
      const reply = yield* call(api, "GET", "/developer/account/wallet", tokens[i % tokens.length])
      expect(reply.status).toBe(200)
      took.push(performance.now() - started)
      yield* Effect.sleep("10 millis")
    }
    return { p50_ms: quantile(took, 0.5), p99_ms: quantile(took, 0.99), reads: took.length }
  })

/**
 * Eight loops of cheap reads with one token, each sending its next as its last is answered, for
 * `seconds`, in a process of their own (as the attack in the issue ran): the statuses they got.
 */
const ATTACKER = `
const [port, token, seconds] = process.argv.slice(1)
const paths = ["/developer/account/wallet", "/auth/me", "/developer/account/limits", "/developer/account/events?limit=1"]
const until = performance.now() + Number(seconds) * 1000
const statuses = {}
await Promise.all(Array.from({ length: 8 }, async (_, loop) => {
  for (let i = loop; performance.now() < until; i++) {
    const response = await fetch("http://127.0.0.1:" + port + paths[i % paths.length], {
      headers: { authorization: "Bearer " + token }
    })
    await response.arrayBuffer()
    statuses[response.status] = (statuses[response.status] ?? 0) + 1
  }
}))
console.log(JSON.stringify(statuses))
`

const attack = (api: Api, token: string, seconds: number) =>
  Effect.async<Record<string, number>>((resume) => {
    const child = execFile(
      process.execPath,
      ["--input-type=module", "-e", ATTACKER, String(api.port), token, String(seconds)],
      { encoding: "utf8", timeout: (seconds + 30) * 1000 },
      (error, stdout) =>
        resume(
          error === null
            ? Effect.succeed(JSON.parse(stdout) as Record<string, number>)
            : Effect.dieMessage(`the attacker failed: ${String(error)}`)
        )
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** Within twice the idle figure, or `floor` ms above it: a blip of a few ms on a loaded machine is not a failure. */
const withinTwice = (attacked: number, idle: number, floor: number) =>
  expect(attacked, `${attacked.toFixed(1)} ms against ${idle.toFixed(1)} ms idle`).toBeLessThanOrEqual(
    Math.max(2 * idle, idle + floor)
  )

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("a user's request budget (D15)", (it) => {
  describe("past the budget", () => {
    it.scoped("429 rate_limited with Retry-After, the write changes nothing; another user and sign-out go on", () =>
      Effect.gen(function*() {
        const { small } = yield* Apis
        const user = yield* createUser({ admin: true })
        const token = yield* signIn(small, user.email)
        const other = yield* signIn(small, (yield* createUser()).email)
        const wallet = yield* call(small, "GET", "/developer/account/wallet", token)
        expect(wallet.status).toBe(200)
        // Twelve credits at once: the rest of the burst of 5 is answered, the others refused.
        const credits = yield* Effect.forEach(
          Array.from({ length: 12 }),
          () =>
            call(small, "POST", "/developer/account/wallet/credits", token, {
              amount_usd: "1",
              idempotency_key: crypto.randomUUID()
            }),
          { concurrency: "unbounded" }
        )
        const statuses = credits.map((reply) => reply.status)
        expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([])
        const applied = statuses.filter((status) => status === 200).length
        expect(applied).toBeLessThanOrEqual(4 + 2)
        const refused = credits.find((reply) => reply.status === 429)
        expect(refused, JSON.stringify(statuses)).toBeDefined()
        const retryAfter = Number(refused?.retryAfter)
        expect(retryAfter).toBeGreaterThanOrEqual(1)
        expect(refused?.body).toMatchObject({
          code: "rate_limited",
          status: 429,
          limit_name: "user_requests_per_second",
          limit: 1,
          retry_after_seconds: retryAfter
        })
        // Another user is not held to this one's budget.
        expect((yield* call(small, "GET", "/developer/account/wallet", other)).status).toBe(200)

        // After the wait, the ledger holds the credits that were answered and none of those refused.
        yield* Effect.sleep(`${retryAfter + 1} seconds`)
        const ledger = yield* call(small, "GET", "/developer/account/wallet/ledger?limit=100", token)
        expect(ledger.status).toBe(200)
        const entries = (ledger.body as { entries: ReadonlyArray<{ kind: string }> }).entries
        expect(entries.filter((entry) => entry.kind === "credit_added").length).toBe(applied)

        // Spent again, and sign-out still ends the token.
        const spent = yield* Effect.forEach(
          Array.from({ length: 8 }),
          () => call(small, "GET", "/auth/me", token),
          { concurrency: 8 }
        )
        expect(spent.map((reply) => reply.status)).toContain(429)
        expect((yield* call(small, "POST", "/auth/logout", token)).status).toBe(204)
        yield* Effect.sleep("1 second")
        expect((yield* call(small, "GET", "/auth/me", token)).status).toBe(401)
      }))
  })

  describe("isolation", () => {
    it.scoped("another account's wallet reads stay within twice idle while one member runs 8 loops of cheap reads", () =>
      Effect.gen(function*() {
        const { shipped } = yield* Apis
        // Another account: an organisation whose twelve members read its wallet in turn.
        const organisation = yield* Effect.orDie((yield* Accounts).createOrganisation("Victim"))
        const victim = yield* Effect.forEach(
          Array.from({ length: 12 }),
          () => Effect.flatMap(createUser({ organisationId: organisation.id }), (user) => signIn(shipped, user.email))
        )
        const attacker = yield* signIn(shipped, (yield* createUser()).email)
        // Warm up, then idle.
        yield* walletReads(shipped, victim, 1)
        const idle = yield* walletReads(shipped, victim, 5)

        const attackFiber = yield* Effect.fork(attack(shipped, attacker, 8))
        yield* Effect.sleep("1500 millis")
        const attacked = yield* walletReads(shipped, victim, 5)
        const statuses = yield* attackFiber.await.pipe(Effect.flatten)
        const load_average = loadavg()[0]
        console.log(JSON.stringify({ idle, attacked, attacker_statuses: statuses, load_average }))

        // The budget as shipped held the attacker: refused past its burst and rate (10 a second
        // in bursts of 50, over the 8 s plus a second of slack), and nothing else went wrong.
        expect(Object.keys(statuses).sort()).toEqual(["200", "429"])
        expect(statuses["200"] ?? 0).toBeLessThanOrEqual(50 + 10 * 9)
        withinTwice(attacked.p50_ms, idle.p50_ms, 25)
        withinTwice(attacked.p99_ms, idle.p99_ms, 150)
      }))
  })
})
