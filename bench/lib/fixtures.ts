import { ConfigProvider, Effect, Layer, Option } from "effect"
import { randomBytes } from "node:crypto"
import { Accounts } from "../../src/Accounts.js"
import { AppConfig } from "../../src/Config.js"
import { DatabaseLive } from "../../src/Sql.js"

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
    const accounts = yield* Accounts
    return yield* Effect.forEach(Array.from({ length: count }, (_, index) => index), (index) =>
      Effect.gen(function*() {
        const suffix = randomBytes(4).toString("hex")
        const email = `bench-${index}-${suffix}@example.com`
        const password = `bench password ${suffix}`
        const user = yield* accounts.createUser({
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
    Effect.provide(Accounts.Default.pipe(Layer.provide(DatabaseLive), Layer.provide(config)))
  ))
}

/** A bearer token, by signing in over HTTP as a client does. */
export const signIn = async (baseUrl: string, user: BenchUser): Promise<string> => {
  const response = await fetch(`${baseUrl}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email: user.email, password: user.password }),
    signal: AbortSignal.timeout(10_000)
  })
  const body: unknown = await response.json()
  if (response.status !== 200 || typeof body !== "object" || body === null || !("access_token" in body)) {
    throw new Error(`sign-in failed: ${response.status} ${JSON.stringify(body)}`)
  }
  return String(body.access_token)
}
