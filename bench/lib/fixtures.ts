import { ConfigProvider, Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import { Credentials } from "../../src/Auth/Credentials.js"
import { AppConfig } from "../../src/Config.js"
import { DatabaseLive } from "../../src/Sql.js"
import type { HttpRequestSpec } from "./load.js"

export interface BenchUser {
  readonly id: string
  readonly email: string
  readonly password: string
}

/**
 * Users made through the `Accounts` service, as the operator CLI makes them
 * (same validation, same argon2id hashing), without a process per user.
 */
export const createUsers = (databaseUrl: string, count: number): Promise<ReadonlyArray<BenchUser>> => {
  const config = AppConfig.Default.pipe(
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["DATABASE_URL", databaseUrl]]))))
  )
  const program = Effect.gen(function*() {
    const credentials = yield* Credentials
    return yield* Effect.forEach(Array.from({ length: count }, (_, index) => index), (index) =>
      Effect.gen(function*() {
        const suffix = randomBytes(4).toString("hex")
        const email = `bench-${index}-${suffix}@example.com`
        const password = `bench password ${suffix}`
        const user = yield* credentials.createUser({
          email,
          name: `Bench ${index}`,
          isAdmin: false,
          organisationId: Option.none(),
          password
        })
        return { id: user.id, email, password }
      }))
  })
  return Effect.runPromise(program.pipe(
    Effect.provide(Credentials.Default.pipe(Layer.provide(DatabaseLive), Layer.provide(config)))
  ))
}

export interface Answer {
  readonly status: number
  readonly body: unknown
}

const SET_UP_TIMEOUT_MS = 120_000

/** One request, sent as a client sends it, and its answer: JSON parsed, null when empty, else the text. */
export const send = async (baseUrl: string, request: HttpRequestSpec): Promise<Answer> => {
  const response = await fetch(baseUrl + request.path, {
    method: request.method,
    headers: { ...request.headers },
    ...(request.body === undefined ? {} : { body: request.body }),
    // Set-up, not a measured request: 64 sign-ins at once queue behind two argon2id hashes at a
    // time, which on a loaded machine took more than the 10 s this was.
    signal: AbortSignal.timeout(SET_UP_TIMEOUT_MS)
  })
  const text = await response.text()
  return { status: response.status, body: text === "" ? null : parseOrText(text) }
}

const parseOrText = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/** The answer's body when its status is `status`; anything else stops the run, saying what came back. */
export const expectStatus = (answer: Answer, status: number, what: string): Readonly<Record<string, unknown>> => {
  const { body } = answer
  if (answer.status !== status || typeof body !== "object" || body === null) {
    throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(body)}`)
  }
  return { ...body }
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** A bearer token, by signing in over HTTP as a client does. */
export const signIn = async (baseUrl: string, user: BenchUser): Promise<string> => {
  const answer = await send(baseUrl, {
    method: "POST",
    path: "/auth/login",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: user.email, password: user.password })
  })
  const token = expectStatus(answer, 200, "sign-in").access_token
  if (typeof token !== "string") throw new Error(`sign-in answered no token: ${JSON.stringify(answer.body)}`)
  return token
}
