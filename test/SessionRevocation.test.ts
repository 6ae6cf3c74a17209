import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, DateTime, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { Agent, request as httpRequest } from "node:http"
import { connect, createServer, type Socket } from "node:net"
import Pg from "pg"
import { Credentials } from "../src/Auth/Credentials.js"
import { Tokens } from "../src/Auth/Tokens.js"
import { AppConfig } from "../src/Config.js"
import { DatabaseLive } from "../src/Sql.js"
import { type Child, freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { createUser, PASSWORD, TestConfig } from "./support/TestApp.js"

/**
 * D2 with many API processes (D14): each process keeps the sign-in sessions it
 * has checked in memory, and drops them when PostgreSQL announces a change.
 * A session ended anywhere is refused by the process that ended it at once
 * and by every other process within 100 ms; a process that cannot hear those
 * announcements asks the database on every request.
 */

interface Api {
  readonly port: number
  readonly process: Child
}

class Apis extends Context.Tag("test/Apis")<Apis, readonly [Api, Api]>() {}

const startApi = (environment: Record<string, string>) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const api = yield* startService("api", { ...environment, PORT: String(port) })
    yield* readyzAnswers(port, api)
    return { port, process: api } satisfies Api
  })

const ApisLive = Layer.scoped(
  Apis,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const environment = serviceEnvironment(config, `${config.redisPrefix}:revocation`)
    return yield* Effect.all([startApi(environment), startApi(environment)], { concurrency: "unbounded" })
  })
)

const TestApis = ApisLive.pipe(
  Layer.provideMerge(Layer.merge(Credentials.Default, Tokens.Default)),
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TestConfig())
)

const request = (api: Api, method: "GET" | "POST", path: string, token?: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${api.port}${path}`, {
      method,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    const text = await response.text()
    return { status: response.status, body: text === "" ? undefined : JSON.parse(text) as Record<string, unknown> }
  })

const me = (api: Api, token: string) => request(api, "GET", "/auth/me", token)

const signInOver = (api: Api, email: string) =>
  Effect.flatMap(
    request(api, "POST", "/auth/login", undefined, { email, password: PASSWORD }),
    (reply) =>
      reply.status === 200 && typeof reply.body?.access_token === "string"
        ? Effect.succeed(reply.body.access_token)
        : Effect.dieMessage(`sign-in failed: ${reply.status}`)
  )

/** Several answers from each process, so each has the session in memory before the change. */
const warm = (apis: ReadonlyArray<Api>, token: string) =>
  Effect.forEach(apis, (api) =>
    Effect.repeatN(
      Effect.flatMap(
        me(api, token),
        (reply) => reply.status === 200 ? Effect.void : Effect.dieMessage(`warming: ${reply.status}`)
      ),
      4
    ))

/**
 * Answers from each process until a heartbeat has come back after the first
 * read: only then does a process answer the sign-in from memory (D2).
 */
const warmPastHeartbeat = (apis: ReadonlyArray<Api>, token: string) =>
  Effect.gen(function*() {
    const since = performance.now()
    while (performance.now() - since < 1_500) yield* warm(apis, token)
  })

/**
 * Asks `api` again and again until it refuses the token, from `since` (when the change had
 * committed): returns when each request was sent, in milliseconds after `since`, and its status.
 */
const untilRefused = (api: Api, token: string, since: number) =>
  Effect.gen(function*() {
    const answers: Array<{ readonly sentAfter: number; readonly status: number }> = []
    for (;;) {
      const sentAfter = performance.now() - since
      const { status } = yield* me(api, token)
      answers.push({ sentAfter, status })
      if (status !== 200 || sentAfter > 2_000) return answers
    }
  })

/** Every answer to a request sent 100 ms or more after the change is a refusal. */
const refusedWithin100ms = (answers: ReadonlyArray<{ readonly sentAfter: number; readonly status: number }>) => {
  expect(answers.filter((answer) => answer.sentAfter >= 100 && answer.status !== 401)).toEqual([])
  expect(answers.at(-1)?.status).toBe(401)
}

/**
 * A TCP proxy in front of PostgreSQL that can go silent: its connections stay
 * open but carry nothing either way, as behind a dead NAT entry or a cable
 * pulled somewhere between. `resume` drops the connections it silenced (their
 * protocol state is lost) and forwards new ones again.
 */
const silenceableProxy = (target: URL) =>
  Effect.acquireRelease(
    Effect.async<{
      readonly url: string
      readonly silence: () => void
      /** When (`performance.now()`) the first bytes a client sent since `silence` were held back. */
      readonly firstHeldAt: () => number | undefined
      readonly resume: () => void
      readonly close: () => void
    }>((resume) => {
      let silent = false
      let firstHeldAt: number | undefined
      const open = new Set<readonly [Socket, Socket]>()
      const server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        const pair = [client, upstream] as const
        open.add(pair)
        client.on("data", (chunk) => {
          if (!silent) return upstream.write(chunk)
          firstHeldAt ??= performance.now()
        })
        upstream.on("data", (chunk) => silent || client.write(chunk))
        const end = () => {
          client.destroy()
          upstream.destroy()
          open.delete(pair)
        }
        for (const socket of pair) {
          socket.on("close", end)
          socket.on("error", end)
        }
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const url = new URL(target)
        url.host = `127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
        resume(Effect.succeed({
          url: url.toString(),
          silence: () => {
            silent = true
            firstHeldAt = undefined
          },
          firstHeldAt: () => firstHeldAt,
          resume: () => {
            silent = false
            for (const [client, upstream] of open) {
              client.destroy()
              upstream.destroy()
            }
          },
          close: () => {
            for (const [client, upstream] of open) {
              client.destroy()
              upstream.destroy()
            }
            server.close()
          }
        }))
      })
    }),
    (proxy) => Effect.sync(proxy.close)
  )

/** Requests the token again and again from `since` until it is refused: how many were served, and until when. */
const servedAfter = (api: Api, token: string, since: number) =>
  Effect.gen(function*() {
    let served = 0
    let lastServedAfter = 0
    for (;;) {
      const sentAfter = performance.now() - since
      const { status } = yield* me(api, token)
      if (status === 200) {
        served++
        lastServedAfter = sentAfter
      }
      if (status !== 200 || sentAfter > 6_000) return { served, lastServedAfter, status }
    }
  })

const LISTENERS = "account-api:sign_in_changes"

/** Sessions of one user ended by one statement, as many as in the issue (item 5). */
const MASS_SESSIONS = 12_000
/** Of them, those the clients send: spread over all, so some are announced late in the statement's order. */
const SENT_SESSIONS = 120
const CLIENTS_PER_API = 6

interface Answer {
  /** When the request was sent (`performance.now()`), and what came back. */
  readonly sentAt: number
  readonly status: number
}

/**
 * Clients that send `tokens` in turn to `api` (`GET /auth/me`) over kept-alive connections, each
 * its next request as soon as the last is answered, until `stop.stopped`; every answer is pushed
 * to `answers` as it comes.
 */
const hammer = (api: Api, tokens: ReadonlyArray<string>, answers: Array<Answer>, stop: { stopped: boolean }) =>
  Effect.promise(async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS_PER_API })
    let next = 0
    const one = (token: string) =>
      new Promise<Answer>((resolve) => {
        const sentAt = performance.now()
        const req = httpRequest(
          { host: "127.0.0.1", port: api.port, path: "/auth/me", agent, headers: { authorization: `Bearer ${token}` } },
          (response) => {
            response.resume()
            response.on("end", () => resolve({ sentAt, status: response.statusCode ?? 0 }))
            response.on("error", () => resolve({ sentAt, status: 0 }))
          }
        )
        req.on("error", () => resolve({ sentAt, status: 0 }))
        req.end()
      })
    const client = async () => {
      while (!stop.stopped) answers.push(await one(tokens[next++ % tokens.length] ?? ""))
    }
    try {
      await Promise.all(Array.from({ length: CLIENTS_PER_API }, client))
    } finally {
      agent.destroy()
    }
  })

const listenerCount = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.map(
    sql<{ count: string }>`SELECT count(*)::text AS count FROM pg_stat_activity
      WHERE application_name = ${LISTENERS} AND datname = current_database()`,
    (rows) => Number(rows[0]?.count ?? 0)
  ))

/** A user with `MASS_SESSIONS` live sessions, and tokens for `SENT_SESSIONS` of them spread over all. */
const manySessions = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const signer = yield* Tokens
  const user = yield* createUser()
  // Written as sign-ins would write them, beyond the cap a sign-in keeps (which this is not about).
  const sessions = yield* sql<{ readonly id: string; readonly expires_at: Date }>`
    INSERT INTO auth_sessions (user_id, expires_at)
    SELECT ${user.id}, now() + interval '1 day' FROM generate_series(1, ${MASS_SESSIONS})
    RETURNING id, expires_at`
  const every = Math.floor(sessions.length / SENT_SESSIONS)
  const tokens = yield* Effect.forEach(
    sessions.filter((_, i) => i % every === 0),
    (session) => signer.sign({ userId: user.id, signInId: session.id }, DateTime.unsafeFromDate(session.expires_at))
  )
  return { user, tokens }
})

/**
 * Clients send `tokens` to each of `apis` until each has answered every one and a heartbeat
 * has passed (so each answers them from memory), then `revoke` runs, and they go on for 1.5 s
 * after it returned. For each process: the answers that were not 401 to requests sent after
 * `revoke` returned (when, in ms after it returned, and the status).
 */
const hammeredThroughRevocation = <E, R>(
  apis: ReadonlyArray<Api>,
  tokens: ReadonlyArray<string>,
  revoke: Effect.Effect<unknown, E, R>
) =>
  Effect.gen(function*() {
    const stop = { stopped: false }
    const answered = apis.map((): Array<Answer> => [])
    const clients = yield* Effect.fork(
      Effect.all(apis.map((api, i) => hammer(api, tokens, answered[i] ?? [], stop)), { concurrency: "unbounded" })
    )
    yield* waitFor(
      "each process has answered every session",
      Effect.sync(() =>
        answered.every((answers) => answers.length > tokens.length) ? Option.some(true) : Option.none()
      ),
      { limit: "30 seconds", every: "50 millis" }
    )
    yield* Effect.sleep("1500 millis")
    const revoking = performance.now()
    yield* revoke
    const returned = performance.now()
    yield* Effect.sleep("1500 millis")
    stop.stopped = true
    yield* Fiber.join(clients)
    return yield* Effect.forEach(answered, (answers) =>
      Effect.gen(function*() {
        const before = answers.filter((answer) => answer.sentAt < revoking)
        const after = answers.filter((answer) => answer.sentAt >= returned)
        // The premise: the process served these sessions until the revocation, and was asked after it.
        expect(before.length).toBeGreaterThan(tokens.length)
        expect(before.filter((answer) => answer.status !== 200)).toEqual([])
        expect(after.length).toBeGreaterThan(10)
        const served = after.filter((answer) => answer.status !== 401).map((answer) => ({
          afterMs: Math.round(answer.sentAt - returned),
          status: answer.status
        }))
        yield* Effect.logInfo("requests sent after the revocation returned").pipe(
          Effect.annotateLogs({
            requests: after.length,
            not_refused: served.length,
            revocation_ms: Math.round(returned - revoking)
          })
        )
        return { served }
      }))
  })

/**
 * A connection of the test's own listening on the sign-in channel, as an API process does:
 * `since` answers what it heard since the last call (a query's answer comes after every
 * notification committed before it).
 */
const listening = (url: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new Pg.Client({ connectionString: url })
      await client.connect()
      const payloads: Array<string> = []
      client.on("notification", (message) => payloads.push(message.payload ?? ""))
      await client.query("LISTEN sign_in_changes")
      return { client, payloads }
    }),
    ({ client }) => Effect.promise(() => client.end())
  ).pipe(Effect.map(({ client, payloads }) => ({
    since: Effect.promise(async () => {
      await client.query("SELECT 1")
      return payloads.splice(0)
    })
  })))

/**
 * A TCP proxy in front of PostgreSQL that hands on everything `delayMillis` late, each way, in
 * order: a listening connection over a slow link.
 */
const delayingProxy = (target: URL, delayMillis: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
      const open = new Set<Socket>()
      const server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        const later = (to: Socket) => (chunk: Buffer) => {
          setTimeout(() => to.destroyed || to.write(chunk), delayMillis)
        }
        client.on("data", later(upstream))
        upstream.on("data", later(client))
        for (const socket of [client, upstream]) {
          open.add(socket)
          const end = () => {
            client.destroy()
            upstream.destroy()
            open.delete(socket)
          }
          socket.on("close", end)
          socket.on("error", end)
        }
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const url = new URL(target)
        url.host = `127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`
        resume(Effect.succeed({
          url: url.toString(),
          close: () => {
            for (const socket of open) socket.destroy()
            server.close()
          }
        }))
      })
    }),
    (proxy) => Effect.sync(proxy.close)
  )

layer(TestApis, { excludeTestServices: true, timeout: "60 seconds" })(
  "sign-in sessions across API processes (D2, D14)",
  (it) => {
    describe("a session ended on one process", () => {
      it.effect("logout is refused at once where it happened and within 100 ms on the other process", () =>
        Effect.gen(function*() {
          const [first, second] = yield* Apis
          const user = yield* createUser()
          const token = yield* signInOver(first, user.email)
          yield* warm([first, second], token)

          expect((yield* request(first, "POST", "/auth/logout", token)).status).toBe(204)
          const loggedOut = performance.now()
          expect((yield* me(first, token)).status).toBe(401)
          refusedWithin100ms(yield* untilRefused(second, token, loggedOut))
          // The user's other sessions stay valid on both.
          const other = yield* signInOver(second, user.email)
          expect((yield* me(first, other)).status).toBe(200)
          expect((yield* me(second, other)).status).toBe(200)
        }))

      it.effect("a password reset by another process ends the user's sessions on both within 100 ms", () =>
        Effect.gen(function*() {
          const apis = yield* Apis
          const user = yield* createUser()
          const tokens = [yield* signInOver(apis[0], user.email), yield* signInOver(apis[1], user.email)]
          for (const token of tokens) yield* warm(apis, token)

          const credentials = yield* Credentials
          yield* credentials.resetPassword(user.email, "another correct horse battery staple")
          const reset = performance.now()
          for (const api of apis) {
            for (const token of tokens) refusedWithin100ms(yield* untilRefused(api, token, reset))
          }
        }))
    })

    describe("thousands of a user's sessions ended at once (issue 39.5)", () => {
      it.scoped("one statement ending them announces the user once; one ending a single session, that session", () =>
        Effect.gen(function*() {
          const config = yield* AppConfig
          const sql = yield* SqlClient.SqlClient
          const { user } = yield* manySessions
          const heard = yield* listening(Redacted.value(config.databaseUrl))
          yield* sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${user.id} AND revoked_at IS NULL`
          expect(yield* heard.since).toEqual([`user:${user.id}`])

          const other = yield* createUser()
          const [session] = yield* sql<{ readonly id: string }>`
            INSERT INTO auth_sessions (user_id, expires_at) VALUES (${other.id}, now() + interval '1 day') RETURNING id`
          yield* sql`UPDATE auth_sessions SET revoked_at = now() WHERE id = ${session?.id ?? ""}`
          expect(yield* heard.since).toEqual([`session:${session?.id}`])
        }))

      it.scoped(
        "a password reset returns once every process heard it, even one whose listening connection is slow",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const credentials = yield* Credentials
            const apis = yield* Apis
            // Notifications reach this process 250 ms after they are sent, and its heartbeats take 500 ms.
            const proxy = yield* delayingProxy(new URL(Redacted.value(config.databaseUrl)), 250)
            const slow = yield* startApi(
              serviceEnvironment(config, `${config.redisPrefix}:slow`, { DATABASE_DIRECT_URL: proxy.url })
            )
            yield* waitFor(
              "the slow process listens",
              Effect.map(listenerCount, (count) => count === 3 ? Option.some(count) : Option.none()),
              { limit: "20 seconds" }
            )
            const { tokens, user } = yield* manySessions
            const outcomes = yield* hammeredThroughRevocation(
              [...apis, slow],
              tokens,
              credentials.resetPassword(user.email, "another correct horse battery staple")
            )
            for (const outcome of outcomes) expect(outcome.served).toEqual([])
          }),
        120_000
      )
    })

    describe("changes to the user and their account", () => {
      it.effect("a membership written by hand moves the caller to the organisation's account on both processes", () =>
        Effect.gen(function*() {
          const apis = yield* Apis
          const sql = yield* SqlClient.SqlClient
          const user = yield* createUser()
          const token = yield* signInOver(apis[0], user.email)
          yield* warm(apis, token)
          expect((yield* me(apis[1], token)).body?.account).toEqual({ kind: "user", id: user.id })

          const [organisation] = yield* sql<
            { id: string }
          >`INSERT INTO organisations (name) VALUES ('Moved') RETURNING id`
          yield* sql`INSERT INTO memberships (user_id, organisation_id) VALUES (${user.id}, ${organisation?.id ?? ""})`
          const joined = performance.now()
          for (const api of apis) {
            const answers: Array<{ readonly sentAfter: number; readonly kind: unknown }> = []
            for (;;) {
              const sentAfter = performance.now() - joined
              const reply = yield* me(api, token)
              const account = reply.body?.account as { kind: string } | undefined
              answers.push({ sentAfter, kind: account?.kind })
              if (account?.kind === "client" || sentAfter > 2_000) break
            }
            expect(answers.filter((answer) => answer.sentAfter >= 100 && answer.kind !== "client")).toEqual([])
            expect(yield* me(api, token)).toMatchObject({
              status: 200,
              body: { account: { kind: "client", id: organisation?.id } }
            })
          }
        }))
    })

    describe("a process that cannot hear the changes", () => {
      it.effect("stops trusting its memory and asks the database until it hears again", () =>
        Effect.gen(function*() {
          const apis = yield* Apis
          const sql = yield* SqlClient.SqlClient
          yield* waitFor(
            "both processes listen",
            Effect.map(listenerCount, (count) => count === 2 ? Option.some(count) : Option.none()),
            { limit: "10 seconds" }
          )
          const user = yield* createUser()
          const token = yield* signInOver(apis[0], user.email)
          yield* warmPastHeartbeat(apis, token)

          // A revocation no one announces (triggers off for this transaction): the premise that
          // processes answer from memory; nothing the service does writes this way.
          yield* sql.withTransaction(Effect.zipRight(
            sql`SET LOCAL session_replication_role = replica`,
            sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${user.id}`
          ))
          // Each still answers it from memory: nothing else could answer 200 now. A request that
          // comes while a heartbeat is out asks the database instead (401), so each is asked again.
          for (const api of apis) {
            yield* waitFor(
              "the process answers from memory",
              Effect.map(me(api, token), (reply) => reply.status === 200 ? Option.some(reply) : Option.none()),
              { limit: "5 seconds", every: "20 millis" }
            )
          }

          // Their listening connections are cut: each process forgets what it kept and asks the database.
          yield* sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                     WHERE application_name = ${LISTENERS} AND datname = current_database()`
          yield* waitFor(
            "the listeners are gone",
            Effect.map(listenerCount, (count) => count === 0 ? Option.some(count) : Option.none()),
            { limit: "10 seconds" }
          )
          for (const api of apis) expect((yield* me(api, token)).status).toBe(401)

          // They listen again, and a logout is heard as before.
          yield* waitFor(
            "both processes listen again",
            Effect.map(listenerCount, (count) => count === 2 ? Option.some(count) : Option.none()),
            { limit: "10 seconds" }
          )
          const fresh = yield* signInOver(apis[0], user.email)
          yield* warm(apis, fresh)
          expect((yield* request(apis[1], "POST", "/auth/logout", fresh)).status).toBe(204)
          refusedWithin100ms(yield* untilRefused(apis[0], fresh, performance.now()))
        }))
    })
    describe("a process whose listening connection goes silent (neither closed nor answering)", () => {
      it.scoped(
        "stops answering from memory as soon as a heartbeat goes unanswered, not when it times out",
        () =>
          Effect.gen(function*() {
            const config = yield* AppConfig
            const sql = yield* SqlClient.SqlClient
            const proxy = yield* silenceableProxy(new URL(Redacted.value(config.databaseUrl)))
            // A process of its own whose listener (only) goes through the proxy.
            const api = yield* startApi(
              serviceEnvironment(config, `${config.redisPrefix}:silent`, { DATABASE_DIRECT_URL: proxy.url })
            )
            const trials: Array<
              { readonly served: number; readonly lastServedAfter: number; readonly heartbeatOutAfter: number }
            > = []
            for (let trial = 0; trial < 3; trial++) {
              yield* waitFor(
                "the process listens through the proxy",
                Effect.map(listenerCount, (count) => count === 3 ? Option.some(count) : Option.none()),
                { limit: "20 seconds" }
              )
              const user = yield* createUser()
              const token = yield* signInOver(api, user.email)
              const witness = yield* createUser()
              const witnessToken = yield* signInOver(api, witness.email)
              yield* warmPastHeartbeat([api], token)
              yield* warmPastHeartbeat([api], witnessToken)
              // The premise: a revocation no one announces is still served, so answers come from memory.
              yield* sql.withTransaction(Effect.zipRight(
                sql`SET LOCAL session_replication_role = replica`,
                sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${witness.id}`
              ))
              expect((yield* me(api, witnessToken)).status).toBe(200)

              proxy.silence()
              yield* sql`UPDATE auth_sessions SET revoked_at = now() WHERE user_id = ${user.id}`
              const revoked = performance.now()
              const { lastServedAfter, served, status } = yield* servedAfter(api, token, revoked)
              expect(status).toBe(401)
              // The heartbeat that went unanswered: the first bytes the process sent into the silence.
              const heldAt = proxy.firstHeldAt()
              expect(heldAt, "a heartbeat went out into the silence").toBeDefined()
              trials.push({
                served,
                lastServedAfter: Math.round(lastServedAfter),
                heartbeatOutAfter: Math.round((heldAt ?? Infinity) - revoked)
              })
              proxy.resume()
            }
            // The figures this test exists for: how many answers, and until when, after the revocation.
            yield* Effect.logInfo("revoked token served while the listener was silent").pipe(
              Effect.annotateLogs({ trials: JSON.stringify(trials) })
            )
            // Nothing was served once the heartbeat was out: had the process waited for its timeout
            // (2 s), it would have answered from memory until 2 s after it, whatever the machine's load.
            for (const { heartbeatOutAfter, lastServedAfter } of trials) {
              expect(lastServedAfter, JSON.stringify(trials)).toBeLessThan(heartbeatOutAfter + 1_000)
            }
          }),
        120_000
      )
    })
  }
)
