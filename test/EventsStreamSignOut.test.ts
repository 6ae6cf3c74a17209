import { describe, expect, layer } from "@effect/vitest"
import { Context, type Duration, Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { programCommand, ROOT } from "../scripts/programs.mjs"
import { AppConfig } from "../src/Config.js"
import { Account } from "../src/Domain/Account.js"
import { Events } from "../src/Events.js"
import { runToEnd } from "./support/childEnvironment.js"
import { type Child, freePort, readyzAnswers, serviceEnvironment, startService, waitFor } from "./support/processes.js"
import { eventsOf, openStream, type Reader } from "./support/sse.js"
import { createUser, PASSWORD, ProcessTestDatabase } from "./support/TestApp.js"

/**
 * A live event stream ends with its sign-in (D2, D17): a logout with the stream's own token, a
 * password reset or a disabled user (the operator CLI, D10) ends the stream within the window in
 * which the token itself is refused, and no event committed after it goes out on it. A real API
 * process, read over HTTP as a client reads it; the CLI run as an operator runs it.
 */

interface Api {
  readonly port: number
  readonly process: Child
}

class TheApi extends Context.Tag("test/EventsStreamSignOut/Api")<TheApi, Api>() {}

const ApiLive = Layer.scoped(
  TheApi,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const port = yield* freePort
    const process = yield* startService("api", {
      ...serviceEnvironment(config, `${config.redisPrefix}:sign-out`),
      PORT: String(port)
    })
    yield* readyzAnswers(port, process)
    return { port, process }
  })
)

const TestLayer = ApiLive.pipe(Layer.provideMerge(Events.Default.pipe(Layer.provideMerge(ProcessTestDatabase()))))

const call = (api: Api, method: "GET" | "POST", path: string, token?: string, body?: unknown) =>
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

const signIn = (api: Api, email: string) =>
  Effect.map(
    call(api, "POST", "/auth/login", undefined, { email, password: PASSWORD }),
    (reply) => String(reply.body?.access_token)
  )

/** The operator CLI on this file's database, as `npm run --silent cli --` runs it. */
const cli = (args: ReadonlyArray<string>, stdin = "") =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const [file, programArgs, own] = programCommand("cli", { args: [...args] })
    const result = yield* Effect.promise(() =>
      runToEnd(file, programArgs, {
        cwd: ROOT,
        input: stdin,
        env: { ...own, DATABASE_URL: Redacted.value(config.databaseUrl), LOG_LEVEL: "warning" },
        timeout: 60_000
      })
    )
    expect(result.status, result.stderr).toBe(0)
  })

const appendEvent = (account: Account) =>
  Effect.flatMap(Events, (events) =>
    events.append([{
      account,
      event: {
        type: "webhook_endpoint.disabled",
        data: { endpoint: { id: randomUUID(), url: "https://example.com/hooks" }, reason: "gone" }
      }
    }]))

const until = (what: string, api: Api, check: () => boolean, limit: Duration.DurationInput = "5 seconds") =>
  waitFor(what, Effect.sync(() => check() ? Option.some(true) : Option.none()), {
    limit,
    every: "5 millis",
    alive: [api.process]
  })

/** A user of their own account, signed in twice, with a stream open on the first sign-in that has had one event. */
const streaming = (api: Api) =>
  Effect.gen(function*() {
    const user = yield* createUser()
    const account = new Account({ kind: "user", id: user.id })
    const token = yield* signIn(api, user.email)
    const other = yield* signIn(api, user.email)
    const reader = yield* openStream(api.port, token)
    expect(reader.status).toBe(200)
    yield* until("the stream is open", api, () => reader.frames.some((frame) => frame.comment === "connected"))
    // Past a heartbeat, so that the process answers the sign-in from memory (D2).
    yield* Effect.sleep("1200 millis")
    yield* appendEvent(account)
    yield* until("the first event", api, () => eventsOf(reader).length === 1)
    return { user, account, token, other, reader }
  })

/** The stream has ended, and an event committed after the sign-in ended never reached it. */
const endedWithNothingAfter = (api: Api, account: Account, reader: Reader) =>
  Effect.gen(function*() {
    yield* appendEvent(account)
    yield* until("the stream ends", api, reader.ended, "3 seconds")
    yield* Effect.sleep("300 millis")
    expect(eventsOf(reader)).toHaveLength(1)
  })

layer(TestLayer, { excludeTestServices: true, timeout: "60 seconds" })("a stream ends with its sign-in (D2)", (it) => {
  describe("event stream", () => {
    it.scoped("a logout with the stream's token ends it; another sign-in's stream goes on", () =>
      Effect.gen(function*() {
        const api = yield* TheApi
        const { account, other, reader, token } = yield* streaming(api)
        const otherReader = yield* openStream(api.port, other)
        yield* until("the other stream is open", api, () => otherReader.frames.some((f) => f.comment === "connected"))

        expect((yield* call(api, "POST", "/auth/logout", token)).status).toBe(204)
        yield* endedWithNothingAfter(api, account, reader)
        // The user's other sign-in is not ended (D2): its stream has the event and stays open.
        yield* until("the event on the other stream", api, () => eventsOf(otherReader).length === 1)
        expect(otherReader.ended()).toBe(false)
        expect((yield* call(api, "GET", "/auth/me", other)).status).toBe(200)
      }))

    it.scoped("a password reset from the CLI ends every stream of the user", () =>
      Effect.gen(function*() {
        const api = yield* TheApi
        const { account, reader, user } = yield* streaming(api)
        yield* cli(["user", "reset-password", "--email", user.email], `${PASSWORD}-new\n`)
        yield* endedWithNothingAfter(api, account, reader)
      }))

    it.scoped("a user disabled from the CLI loses their streams", () =>
      Effect.gen(function*() {
        const api = yield* TheApi
        const { account, reader, user } = yield* streaming(api)
        yield* cli(["user", "disable", "--email", user.email])
        yield* endedWithNothingAfter(api, account, reader)
      }))

    it.scoped("a stream of a token whose sign-in is not ended keeps delivering", () =>
      Effect.gen(function*() {
        const api = yield* TheApi
        const { account, reader, token } = yield* streaming(api)
        // Another user's logout is not this stream's end.
        const stranger = yield* createUser()
        expect((yield* call(api, "POST", "/auth/logout", yield* signIn(api, stranger.email))).status).toBe(204)
        yield* appendEvent(account)
        yield* until("the second event", api, () => eventsOf(reader).length === 2)
        expect(reader.ended()).toBe(false)
        expect((yield* call(api, "GET", "/auth/me", token)).status).toBe(200)
      }))
  })
})
