// The same session in the Effect flavour of @account-api/client: the contract's HttpApiClient and
// the producer as a Layer, every error typed in the error channel.
//   ACCOUNT_API_EMAIL=… ACCOUNT_API_PASSWORD=… npx tsx session-runner-effect.ts
// It leaves its session on the books, closed, 1.25 USD spent; a credit of 1.25 puts the
// wallet's available back if you want it.
import { Api } from "@account-api/client/effect"
import { SettlementProducer } from "@account-api/client/settlement"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Config, Console, Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"

const program = Effect.gen(function*() {
  const baseUrl = yield* Config.string("ACCOUNT_API_URL").pipe(Config.withDefault("http://localhost:8080"))
  const email = yield* Config.string("ACCOUNT_API_EMAIL")
  const password = yield* Config.redacted("ACCOUNT_API_PASSWORD")

  const signIn = yield* HttpApiClient.make(Api, { baseUrl })
  const { access_token } = yield* signIn.auth.login({ payload: { email, password: Redacted.value(password) } })
  const api = yield* HttpApiClient.make(Api, {
    baseUrl,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(access_token))
  })
  const { account } = yield* api.auth.me()

  const producer = yield* SettlementProducer
  const session_id = `example-${randomUUID()}`
  const reserved = yield* producer.enqueueReserve({
    account_id: account.id,
    session_id,
    amount_usd: "5",
    idempotency_key: `${session_id}-reserve`
  }).pipe(Effect.flatMap((job) => job.result()))
  yield* Console.log(`reserve ${reserved.status}: reserved ${reserved.wallet.reserved_usd}`)
  const spent = yield* producer.enqueueSpend({
    account_id: account.id,
    session_id,
    amount_usd: "1.25",
    idempotency_key: `${session_id}-spend-1`
  }).pipe(Effect.flatMap((job) => job.result()))
  yield* Console.log(`spend ${spent.status}: spent ${spent.wallet.spent_usd}`)
  const released = yield* producer.enqueueRelease({
    account_id: account.id,
    session_id,
    idempotency_key: `${session_id}-release`
  }).pipe(Effect.flatMap((job) => job.result()))
  yield* Console.log(`release ${released.status}: reserved ${released.wallet.reserved_usd}`)

  const closed = yield* api.sessions.getSession({ path: { session_id } })
  yield* Console.log(`session ${closed.state}: spent ${closed.spent_usd.toFixed(6)}`)
})

const Settlement = Layer.unwrapEffect(
  Effect.gen(function*() {
    const redisUrl = yield* Config.string("REDIS_URL").pipe(Config.withDefault("redis://127.0.0.1:6379"))
    const prefix = yield* Config.option(Config.string("SETTLEMENT_QUEUE_PREFIX"))
    return SettlementProducer.layer({
      redisUrl,
      ...Option.match(prefix, { onNone: () => ({}), onSome: (prefix) => ({ prefix }) })
    })
  })
)

await Effect.runPromise(program.pipe(Effect.provide(Layer.mergeAll(FetchHttpClient.layer, Settlement))))
