import { expect, layer } from "@effect/vitest"
import { Queue } from "bullmq"
import { Effect, Layer, Option, Redacted } from "effect"
import { Redis as IORedis } from "ioredis"
import { createServer } from "node:http"
import { AppConfig } from "../src/Config.js"
import { WEBHOOK_QUEUE } from "../src/Webhooks/Queue.js"
import { WebhookWorkerLive } from "../src/Webhooks/Worker.js"
import { waitFor } from "./support/processes.js"
import { call, signedInUser, TestApp } from "./support/TestApp.js"
import { newKey, postCredit } from "./support/Wallets.js"
import { type Received, receiver } from "./support/webhookReceiver.js"

/**
 * One account's endpoints that never answer must not delay another account's deliveries (D17):
 * its deliveries in flight are bounded, per account and per endpoint, across the workers' slots.
 * Retries come back within a few milliseconds, so the hanging deliveries keep pressing for slots.
 */
const TestLayer = WebhookWorkerLive.pipe(
  Layer.provideMerge(
    TestApp({ WEBHOOK_ALLOW_INSECURE: "true", WEBHOOK_RETRY_SCALE: "0.001", WEBHOOK_RELAY_SWEEP_MS: "500" })
  )
)

/**
 * A server that takes every request and never answers, counting those open at once (in all, and
 * per path) until the sender gives up on them.
 */
const hangingServer = Effect.acquireRelease(
  Effect.async<{
    readonly url: (path: string) => string
    readonly open: () => number
    readonly most: { all: number; perPath: number }
    readonly close: () => Promise<void>
  }>((resume) => {
    const openByPath = new Map<string, number>()
    let open = 0
    const most = { all: 0, perPath: 0 }
    const server = createServer((request, response) => {
      const path = request.url ?? "/"
      open += 1
      openByPath.set(path, (openByPath.get(path) ?? 0) + 1)
      most.all = Math.max(most.all, open)
      most.perPath = Math.max(most.perPath, openByPath.get(path) ?? 0)
      response.on("close", () => {
        open -= 1
        openByPath.set(path, (openByPath.get(path) ?? 1) - 1)
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      resume(Effect.succeed({
        url: (path: string) => `http://127.0.0.1:${port}${path}`,
        open: () => open,
        most,
        close: () =>
          new Promise<void>((resolve) => {
            server.close(() => resolve())
            server.closeAllConnections()
          })
      }))
    })
  }),
  (server) => Effect.promise(server.close)
)

/** The nearest-rank percentile of some latencies. */
const percentile = (latencies: ReadonlyArray<number>, p: number) => {
  const sorted = [...latencies].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
}

const createEndpoint = (token: string, url: string) =>
  Effect.map(
    call("POST", "/developer/account/webhooks", { token, body: { url, types: ["wallet.credit_added"] } }),
    (reply) => {
      expect(reply.status, JSON.stringify(reply.body)).toBe(201)
      return (reply.body as { id: string }).id
    }
  )

/** A credit's amount as its event carries it (`data.entry.amount_usd`). */
const creditedUsd = (delivery: Received) =>
  Number((JSON.parse(delivery.body) as { data: { entry: { amount_usd: string } } }).data.entry.amount_usd)

/**
 * How long each of `count` credits, made 200 ms apart, takes from before its request (its event
 * commits within it) to `path` of the receiver having it; each credit's amount (1, 2, … dollars)
 * tells its delivery apart.
 */
const latencies = (
  token: string,
  server: Effect.Effect.Success<typeof receiver>,
  path: string,
  count: number
) =>
  Effect.forEach(Array.from({ length: count }, (_, index) => index), (index) =>
    Effect.gen(function*() {
      yield* Effect.sleep(`${index * 200} millis`)
      const sentAt = Date.now()
      const amount = index + 1
      expect((yield* postCredit(token, { amount_usd: String(amount), idempotency_key: newKey() })).status).toBe(200)
      const arrival = yield* waitFor(
        `${path} got the credit of ${amount}`,
        Effect.sync(() =>
          Option.fromNullable(
            server.received.find((got) => got.path === path && got.at >= sentAt && creditedUsd(got) === amount)
          )
        ),
        { limit: "60 seconds", every: "10 millis" }
      )
      return arrival.at - sentAt
    }), { concurrency: "unbounded" })

/**
 * p99 with the hanging endpoints within 2× p99 without them plus 3 s (the load of a shared machine
 * changes between the two); the unbounded worker gives 10 s and more.
 */
const expectOnTime = (what: string, without: ReadonlyArray<number>, withHanging: ReadonlyArray<number>) => {
  const p99 = { without: percentile(without, 99), with: percentile(withHanging, 99) }
  console.info(`${what} p99: ${p99.without} ms without the hanging endpoints, ${p99.with} ms with them`, {
    without,
    with: withHanging
  })
  expect(p99.with).toBeLessThanOrEqual(2 * p99.without + 3_000)
}

layer(TestLayer, { excludeTestServices: true, timeout: "180 seconds" })("webhook fairness (D17)", (it) => {
  it.scoped(
    "one account's endpoints that never answer leave another account's deliveries on time (p99 with ≤ 2× without + 3 s)",
    () =>
      Effect.gen(function*() {
        const { concurrency, inFlightPerAccount, inFlightPerEndpoint } = (yield* AppConfig).webhooks
        const healthy = yield* receiver
        const healthyAdmin = yield* signedInUser({ admin: true })
        yield* createEndpoint(healthyAdmin.token, healthy.url("/healthy"))
        // Warm: the worker's connection to the receiver is made, so both sides measure the same path.
        yield* latencies(healthyAdmin.token, healthy, "/healthy", 1)
        const without = yield* latencies(healthyAdmin.token, healthy, "/healthy", 10)

        // The attacker: ten endpoints that never answer and enough events to fill every slot twice over.
        const hanging = yield* hangingServer
        const attacker = yield* signedInUser({ admin: true })
        const attackerEndpoints = yield* Effect.forEach(
          Array.from({ length: 10 }, (_, endpoint) => endpoint),
          (endpoint) => createEndpoint(attacker.token, hanging.url(`/hang/${endpoint}`))
        )
        const events = Math.ceil((2 * concurrency) / 10)
        for (let event = 0; event < events; event++) {
          expect((yield* postCredit(attacker.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
        }
        yield* waitFor(
          "the attacker's deliveries hang",
          Effect.sync(() => hanging.open() >= inFlightPerAccount ? Option.some(true) : Option.none()),
          { limit: "30 seconds" }
        )
        const withHanging = yield* latencies(healthyAdmin.token, healthy, "/healthy", 10)
        // Their jobs left are skipped once taken, so the next test starts from a quiet queue.
        for (const id of attackerEndpoints) {
          yield* call("DELETE", `/developer/account/webhooks/${id}`, { token: attacker.token })
        }

        expectOnTime("another account's delivery", without, withHanging)
        expect(hanging.most.all).toBeLessThanOrEqual(inFlightPerAccount)
        expect(hanging.most.perPath).toBeLessThanOrEqual(inFlightPerEndpoint)
      }),
    // A safety net: the unbounded worker takes minutes here; the bounded one, seconds.
    120_000
  )

  it.scoped(
    "an endpoint that never answers leaves its account's other endpoint on time (p99 with ≤ 2× without + 3 s)",
    () =>
      Effect.gen(function*() {
        const { inFlightPerAccount, inFlightPerEndpoint } = (yield* AppConfig).webhooks
        const healthy = yield* receiver
        const admin = yield* signedInUser({ admin: true })
        yield* createEndpoint(admin.token, healthy.url("/mine"))
        yield* latencies(admin.token, healthy, "/mine", 1)
        const without = yield* latencies(admin.token, healthy, "/mine", 10)

        // Events enough for the hanging endpoint to fill every place of the account were it unbounded.
        const hanging = yield* hangingServer
        yield* createEndpoint(admin.token, hanging.url("/hang"))
        yield* latencies(admin.token, healthy, "/mine", inFlightPerAccount)
        yield* waitFor(
          "the endpoint's deliveries hang",
          Effect.sync(() => hanging.open() >= inFlightPerEndpoint ? Option.some(true) : Option.none()),
          { limit: "30 seconds" }
        )
        const withHanging = yield* latencies(admin.token, healthy, "/mine", 10)

        expectOnTime("the account's other endpoint", without, withHanging)
        expect(hanging.most.perPath).toBeLessThanOrEqual(inFlightPerEndpoint)
      }),
    // A safety net: the unbounded worker takes minutes here; the bounded one, seconds.
    120_000
  )

  it.scoped("redeliver beyond its limit is 429 rate_limited with Retry-After, and queues nothing", () =>
    Effect.gen(function*() {
      const config = yield* AppConfig
      const limit = config.webhooks.redeliveriesPerMinute
      const server = yield* receiver
      const admin = yield* signedInUser({ admin: true })
      const endpointId = yield* createEndpoint(admin.token, server.url("/redeliver"))
      expect((yield* postCredit(admin.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
      const first = yield* waitFor(
        "the event is delivered",
        Effect.sync(() => Option.fromNullable(server.received[0])),
        { limit: "30 seconds" }
      )
      const eventId = first.headers["webhook-id"] ?? ""
      const redeliver = call("POST", `/developer/account/events/${eventId}/redeliver`, { token: admin.token })

      for (let n = 0; n < limit; n++) expect((yield* redeliver).status).toBe(202)
      for (let n = 0; n < 3; n++) {
        const refused = yield* redeliver
        expect(refused.status).toBe(429)
        expect(refused.body).toMatchObject({ status: 429, code: "rate_limited" })
        expect(Number(refused.headers["retry-after"])).toBeGreaterThanOrEqual(1)
        expect(Number(refused.headers["retry-after"])).toBeLessThanOrEqual(60)
      }
      // Per account: another account's administrator is not held back by it.
      const other = yield* signedInUser({ admin: true })
      yield* createEndpoint(other.token, server.url("/other"))
      expect((yield* postCredit(other.token, { amount_usd: "1", idempotency_key: newKey() })).status).toBe(200)
      const otherEvent = yield* waitFor(
        "the other account's event is delivered",
        Effect.sync(() => Option.fromNullable(server.received.find((got) => got.path === "/other"))),
        { limit: "30 seconds" }
      )
      const otherCall = yield* call(
        "POST",
        `/developer/account/events/${otherEvent.headers["webhook-id"] ?? ""}/redeliver`,
        { token: other.token }
      )
      expect(otherCall.status).toBe(202)

      // The queue holds the first delivery and the accepted redeliveries of the pair, no more.
      const connection = new IORedis(Redacted.value(config.redisUrl), { maxRetriesPerRequest: null })
      const queue = new Queue(WEBHOOK_QUEUE, { connection, prefix: config.settlementQueuePrefix })
      const jobs = yield* Effect.acquireRelease(
        Effect.promise(() => queue.getJobs(["waiting", "active", "delayed", "prioritized", "completed", "failed"])),
        () => Effect.promise(() => queue.close().then(() => connection.quit()))
      )
      expect(jobs.filter((job) => job.id?.startsWith(`${eventId}.${endpointId}`) === true)).toHaveLength(limit + 1)
    }))
})
