import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { randomBytes } from "node:crypto"
import { inject } from "vitest"
import { Accounts } from "../../src/Accounts.js"
import { Credentials } from "../../src/Auth/Credentials.js"
import { AppConfig } from "../../src/Config.js"
import { serveOn } from "../../src/Http.js"
import { Redis } from "../../src/Redis.js"
import { DatabaseLive } from "../../src/Sql.js"
import { Wallets } from "../../src/Wallets.js"
import { UNBUDGETED } from "./budget.js"
import { adminQuery, databaseUrl } from "./databases.js"

const uniqueName = (prefix: string) => `${prefix}_${randomBytes(6).toString("hex")}`

/** A database cloned from the run's migrated template, dropped when the file ends. */
export const TestDatabaseUrl = Effect.acquireRelease(
  Effect.promise(async () => {
    const template = inject("templateDatabase")
    // The run's process id in the name (as in the template's) lets a later run drop it if this one is killed.
    const name = uniqueName(`account_api_test_${template.split("_")[3]}`)
    await adminQuery(`CREATE DATABASE "${name}" TEMPLATE "${template}"`)
    return name
  }),
  (name) => Effect.promise(() => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))
).pipe(Effect.map(databaseUrl))

/** A Redis key prefix of the file's own, whose keys are deleted when the file ends. */
const TestRedisPrefix = Effect.acquireRelease(
  Effect.succeed(uniqueName("account-api-test")),
  (prefix) =>
    Effect.promise(async () => {
      const redis = new IORedis(process.env.REDIS_URL ?? "redis://127.0.0.1:6379")
      try {
        let cursor = "0"
        do {
          const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}:*`, "COUNT", 500)
          if (keys.length > 0) await redis.del(...keys)
          cursor = next
        } while (cursor !== "0")
      } finally {
        redis.disconnect()
      }
    })
)

/** The settings of one test file: its own database and prefix, a fixed secret, and any overrides. */
export const TestConfig = (overrides: Record<string, string> = {}) =>
  Layer.unwrapScoped(
    Effect.gen(function*() {
      const settings = new Map([
        ["DATABASE_URL", yield* TestDatabaseUrl],
        ["REDIS_URL", process.env.REDIS_URL ?? "redis://127.0.0.1:6379"],
        ...(yield* Effect.map(TestRedisPrefix, (prefix) =>
          [["REDIS_PREFIX", prefix], ["SETTLEMENT_QUEUE_PREFIX", prefix]] as const)),
        ["AUTH_SECRET", "test-secret-that-is-at-least-32-bytes-long"],
        // Tests that are not about it are not held to a user's request budget (D15): many ask one
        // token hundreds of times a second. test/RequestBudget.test.ts holds it.
        ...Object.entries(UNBUDGETED),
        ...Object.entries(overrides)
      ])
      return AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(settings))))
    })
  )

/**
 * The test's own side of a test that runs real programs (the API, the worker): users and
 * wallets arranged on the same database and settings the programs are started with.
 */
export const ProcessTestDatabase = (overrides: Record<string, string> = {}) =>
  Layer.mergeAll(Wallets.Default, Credentials.Default).pipe(
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig(overrides))
  )

/**
 * The real server layers on a random local port, with an `HttpClient` aimed at
 * it, plus the services tests use to arrange data as an operator would.
 */
export const TestApp = (overrides: Record<string, string> = {}) =>
  serveOn(NodeHttpServer.layerTest).pipe(
    Layer.provideMerge(Layer.mergeAll(Accounts.Default, Credentials.Default, Redis.Default)),
    Layer.provideMerge(DatabaseLive),
    Layer.provideMerge(TestConfig(overrides))
  )

export interface Reply {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body, the text of any other body, or `undefined` when there is none. */
  readonly body: unknown
}

export interface CallOptions {
  readonly token?: string
  readonly body?: unknown
  /** Sent as is, for bodies that are not JSON. */
  readonly rawBody?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** One HTTP request as a client would make it. */
export const call = (method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, options: CallOptions = {}) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    let request = HttpClientRequest.make(method)(path).pipe(HttpClientRequest.setHeaders(options.headers ?? {}))
    if (options.token !== undefined) request = HttpClientRequest.bearerToken(request, options.token)
    if (options.rawBody !== undefined) {
      request = HttpClientRequest.bodyText(request, options.rawBody, "application/json")
    } else if (options.body !== undefined) {
      request = yield* HttpClientRequest.bodyJson(request, options.body)
    }
    const response = yield* client.execute(request)
    const text = yield* response.text
    const isJson = /json/.test(response.headers["content-type"] ?? "")
    const body = text === "" ? undefined : isJson ? JSON.parse(text) : text
    return { status: response.status, headers: response.headers, body } satisfies Reply
  }).pipe(Effect.scoped, Effect.orDie)

export const PASSWORD = "correct horse battery staple"

let sequence = 0

/** Creates a user the way the CLI does; with `organisationId` they join that organisation's account. */
export const createUser = (
  options: {
    readonly admin?: boolean
    readonly operator?: boolean
    readonly organisationId?: string
    readonly email?: string
  } = {}
) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const email = options.email ?? `user${++sequence}.${randomBytes(3).toString("hex")}@example.com`
    const user = yield* credentials.createUser({
      email,
      name: `User ${sequence}`,
      isAdmin: options.admin ?? false,
      isOperator: options.operator ?? false,
      organisationId: Option.fromNullable(options.organisationId),
      password: PASSWORD
    })
    return { id: user.id, email }
  }).pipe(Effect.orDie)

/** Signs in over HTTP and returns the bearer token. */
export const signIn = (email: string, password = PASSWORD) =>
  Effect.flatMap(
    call("POST", "/auth/login", { body: { email, password } }),
    (reply) =>
      reply.status === 200 && typeof reply.body === "object" && reply.body !== null && "access_token" in reply.body
        ? Effect.succeed(String(reply.body.access_token))
        : Effect.dieMessage(`sign-in failed: ${reply.status} ${JSON.stringify(reply.body)}`)
  )

/** A fresh user of their own account, signed in. */
export const signedInUser = (options: Parameters<typeof createUser>[0] = {}) =>
  Effect.gen(function*() {
    const user = yield* createUser(options)
    return { ...user, token: yield* signIn(user.email) }
  })
