import { SqlClient } from "@effect/sql"
import { DelayedError, type Job, UnrecoverableError, Worker } from "bullmq"
import { Clock, Effect, Exit, Layer, Option, Runtime, Schema } from "effect"
import { lookup } from "node:dns"
import { Agent as HttpAgent, request as httpRequest } from "node:http"
import { Agent as HttpsAgent, request as httpsRequest } from "node:https"
import type { LookupFunction } from "node:net"
import { hostname } from "node:os"
import { AppConfig } from "../Config.js"
import { accountOfKey } from "../Domain/Account.js"
import {
  DELIVERY_TIMEOUT_MS,
  deliveryError,
  type DeliveryFailure,
  FAILING_DISABLES_AFTER_MS,
  parseRetryAfter,
  retryDelay
} from "../Domain/Webhooks.js"
import { Events } from "../Events.js"
import { logDraining } from "../Logging.js"
import { makeBatcher } from "../Settlement/Batcher.js"
import { bullConnection } from "../Settlement/Connection.js"
import { DeliveriesInFlight, timesParked, waitAtBound } from "./InFlight.js"
import { WebhookMetrics } from "./Metrics.js"
import { DeliveryJob, deliveryJobId, WEBHOOK_QUEUE } from "./Queue.js"
import { type AttemptRow, type SigningRow, WebhooksRepo } from "./Repo.js"
import { AddressRefused, failureOf, refusedAddress, refusedLiteral, signature } from "./Rules.js"

/** Deliveries whose endpoint reads, or attempt writes, one statement takes at most. */
const STATEMENT_BATCH = 200

/** What an attempt came to: an answer's status (and `Retry-After`), or why there was none. */
type Sent =
  | { readonly _tag: "Answered"; readonly status: number; readonly retryAfter: string | undefined }
  | { readonly _tag: "Failed"; readonly failure: DeliveryFailure; readonly cause: string }

/** Thrown to BullMQ to retry after `delayMs` (the worker's backoff reads it). */
class RetryLater extends Error {
  constructor(message: string, readonly delayMs: number) {
    super(message)
  }
}

/**
 * Resolves as Node would, but refuses every address that is not public (unless allowed): checked
 * on the addresses the connection is made to, at every delivery (D17), so a name that resolves
 * elsewhere later (DNS rebinding) is caught too. The connection takes the addresses checked here;
 * no second lookup follows.
 */
const checkedLookup = (allowInsecure: boolean): LookupFunction => (host, options, callback) => {
  lookup(host, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, "", 0)
    const refused = allowInsecure
      ? undefined
      : addresses.map((entry) => refusedAddress(entry.address)).find((found) => found !== undefined)
    if (refused !== undefined) return callback(new AddressRefused(host, refused), "", 0)
    if (options.all === true) return callback(null, addresses)
    const [first] = addresses
    return first === undefined
      ? callback(new Error(`${host} has no address`), "", 0)
      : callback(null, first.address, first.family)
  })
}

/**
 * How long a connection kept for the next delivery may sit idle: under the 5 s that Node's
 * servers (and most others) keep one, so a kept connection is seldom closed under a request.
 */
const IDLE_CONNECTION_MS = 4_000

/**
 * A process's connections to endpoints, kept between deliveries (a TLS handshake and a connect
 * per delivery cost more than the delivery). The lookup checks the address each connection is
 * made to, so every delivery goes to an address that was checked: a name that starts resolving
 * inside is refused at the next connection, and a kept one stays with the address it was made to.
 */
const makeAgents = (allowInsecure: boolean) => {
  const options = { keepAlive: true, timeout: IDLE_CONNECTION_MS, lookup: checkedLookup(allowInsecure) }
  return { http: new HttpAgent(options), https: new HttpsAgent(options) }
}
type Agents = ReturnType<typeof makeAgents>

/** One POST, redirects not followed, answered within 10 s or given up. */
const send = (url: string, headers: Record<string, string>, body: string, allowInsecure: boolean, agents: Agents) =>
  new Promise<Sent>((resolve) => {
    let target: URL
    try {
      target = new URL(url)
    } catch {
      return resolve({ _tag: "Failed", failure: "url_refused", cause: "the URL does not parse" })
    }
    if (!allowInsecure && target.protocol !== "https:") {
      return resolve({ _tag: "Failed", failure: "url_refused", cause: `${target.protocol} is not https:` })
    }
    // An IP literal takes no lookup, so the lookup's check never sees it: judged here, by its bytes.
    const literal = allowInsecure ? undefined : refusedLiteral(target.hostname)
    if (literal !== undefined) {
      const refused = new AddressRefused(target.hostname, literal)
      return resolve({ _tag: "Failed", failure: "address_refused", cause: refused.message })
    }
    const secure = target.protocol === "https:"
    const request = (secure ? httpsRequest : httpRequest)(target, {
      method: "POST",
      headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
      agent: secure ? agents.https : agents.http,
      signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS)
    }, (response) => {
      // Only the status counts; the body is read and dropped so the connection serves the next.
      response.resume()
      const retryAfter = response.headers["retry-after"]
      resolve({ _tag: "Answered", status: response.statusCode ?? 0, retryAfter })
    })
    request.on("error", (error) => {
      const code = "code" in error && typeof error.code === "string" ? ` (${error.code})` : ""
      // OpenSSL's messages run over several lines; a log line is one.
      resolve({ _tag: "Failed", failure: failureOf(error), cause: `${error.message.replace(/\s+/g, " ")}${code}` })
    })
    request.end(body)
  })

const decodeJob = Schema.decodeUnknownOption(DeliveryJob)

/**
 * The delivery worker (D17): sends each job's event to its endpoint as Standard Webhooks 1.0 has
 * it, records the attempt, and answers BullMQ: done on a 2xx, a 410 (the endpoint disabled) or an
 * endpoint gone or disabled; retried on the schedule otherwise, then failed.
 */
export const WebhookDeliveryLive = Layer.scopedDiscard(Effect.gen(function*() {
  const repo = yield* WebhooksRepo
  const events = yield* Events
  const metrics = yield* WebhookMetrics
  const inFlight = yield* DeliveriesInFlight
  const sql = yield* SqlClient.SqlClient
  const config = yield* AppConfig
  const { allowInsecure, concurrency, retryScale } = config.webhooks
  const { lockDurationMs, maxStalledCount, stalledIntervalMs } = config.settlement
  const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
  const agents = yield* Effect.acquireRelease(
    Effect.sync(() => makeAgents(allowInsecure)),
    (agents) =>
      Effect.sync(() => {
        agents.http.destroy()
        agents.https.destroy()
      })
  )

  // Deliveries in flight at once share their statements: one read of their endpoints, one write of
  // their attempts. A statement starts at once when none is running; what comes while one runs
  // goes into the next, so under load one statement serves many deliveries.
  const endpointsBatcher = yield* makeBatcher<string, Option.Option<SigningRow>, never>({
    maxBatch: STATEMENT_BATCH,
    maxRunning: 1,
    run: (items) =>
      Effect.map(repo.forDeliveries(items.map(({ item }) => item)), (rows) => {
        const byId = new Map(rows.map((row) => [row.id, row]))
        return items.map(({ item }) => Exit.succeed(Option.fromNullable(byId.get(item))))
      })
  })
  const attemptsBatcher = yield* makeBatcher<AttemptRow, void, never>({
    maxBatch: STATEMENT_BATCH,
    maxRunning: 1,
    run: (items) => Effect.as(repo.recordAttempts(items.map(({ item }) => item)), items.map(() => Exit.void))
  })

  /** Disables the endpoint and writes `webhook_endpoint.disabled` in the same transaction. */
  const disable = (endpoint: SigningRow, reason: "gone" | "failing") =>
    sql.withTransaction(Effect.gen(function*() {
      const disabled = yield* repo.disable({ id: endpoint.id, reason })
      if (Option.isNone(disabled)) return
      yield* events.append([{
        account: accountOfKey(endpoint),
        event: { type: "webhook_endpoint.disabled", data: { endpoint: { id: endpoint.id, url: endpoint.url }, reason } }
      }])
    })).pipe(Effect.orDie)

  const attempt = (job: Job, token: string | undefined) =>
    Effect.gen(function*() {
      const decoded = decodeJob(job.data)
      if (Option.isNone(decoded)) return { _tag: "Fail", error: "not a delivery job" } as const
      const delivery = decoded.value
      // The batchers keep the order of items under one key; a delivery's own id orders it after none.
      const key = deliveryJobId(delivery.event_id, delivery.endpoint_id)
      const found = yield* endpointsBatcher.submit(key, delivery.endpoint_id)
      // Deleted or disabled since the event was relayed: nothing to send.
      if (Option.isNone(found) || !found.value.enabled) {
        metrics.record("skipped")
        return { _tag: "Done" } as const
      }
      const endpoint = found.value
      // At its account's or its endpoint's bound, the job waits in the queue (delayed, not counted as
      // an attempt), not in one of this worker's slots; its place is held while the endpoint is asked.
      const place = {
        job: job.id ?? key,
        endpoint: endpoint.id,
        account: `${endpoint.account_kind}:${endpoint.account_id}`,
        parked: timesParked(job)
      }
      const held = yield* inFlight.hold(place)
      if (Option.isNone(held)) {
        const now = yield* Clock.currentTimeMillis
        // Not moved (its lock lost, Redis away): it stays active until BullMQ takes it up again as stalled.
        yield* Effect.ignore(Effect.tryPromise(() => job.moveToDelayed(now + waitAtBound(job), token)))
        return { _tag: "Wait" } as const
      }
      const timestamp = Math.floor(Date.now() / 1000)
      const body = JSON.stringify({ type: delivery.type, timestamp: delivery.created_at, data: delivery.data })
      const headers = {
        "content-type": "application/json",
        "user-agent": "account-api-webhooks",
        "webhook-id": delivery.event_id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature(endpoint.secrets, { id: delivery.event_id, timestamp, body })
      }
      const started = performance.now()
      const sent = yield* Effect.promise(() => send(endpoint.url, headers, body, allowInsecure, agents))
      yield* held.value
      const durationMs = Math.round(performance.now() - started)
      const number = job.attemptsMade + 1
      const record = (
        outcome: string,
        statusCode: number | null,
        error: string | null,
        nextMs: number | null
      ) =>
        attemptsBatcher.submit(key, {
          endpoint_id: endpoint.id,
          event_id: delivery.event_id,
          event_type: delivery.type,
          attempt: number,
          outcome,
          status_code: statusCode,
          duration_ms: durationMs,
          error,
          next_attempt_ms: nextMs
        })
      const status = sent._tag === "Answered" ? sent.status : null
      if (status !== null && status >= 200 && status < 300) {
        yield* record("delivered", status, null, null)
        // Ends a run of failures; nothing to write (and no statement) when there was none.
        if (endpoint.failing_since !== null) yield* repo.succeeded(endpoint.id)
        metrics.record("delivered")
        return { _tag: "Done" } as const
      }
      if (status === 410) {
        yield* record("gone", status, deliveryError("gone"), null)
        yield* disable(endpoint, "gone")
        metrics.record("gone")
        return { _tag: "Done" } as const
      }
      const error = deliveryError(
        sent._tag === "Failed"
          ? sent.failure
          : status !== null && status >= 300 && status < 400
          ? "redirect"
          : "http_status"
      )
      // The account is shown the class only; operators get what the socket said.
      if (sent._tag === "Failed") {
        yield* Effect.logWarning("webhook delivery failed").pipe(
          Effect.annotateLogs({ endpoint_id: endpoint.id, failure: sent.failure, cause: sent.cause })
        )
      }
      const retryAfterMs = sent._tag === "Answered" && (sent.status === 429 || sent.status === 503)
        ? parseRetryAfter(sent.retryAfter, Date.now())
        : undefined
      const delay = retryDelay(number, { scale: retryScale, retryAfterMs })
      yield* record(delay === undefined ? "failed" : "retrying", status, error, delay ?? null)
      const { failing_since } = yield* repo.failed(endpoint.id)
      const failingMs = Date.now() - failing_since.epochMillis
      if (failingMs >= FAILING_DISABLES_AFTER_MS * retryScale) {
        yield* disable(endpoint, "failing")
        metrics.record("failed")
        return { _tag: "Done" } as const
      }
      if (delay === undefined) {
        metrics.record("failed")
        return { _tag: "Fail", error } as const
      }
      metrics.record("retry")
      return { _tag: "Retry", error, delay } as const
    })

  const { connection, prefix, report } = yield* bullConnection
  // Deliveries taken and not finished, for the `draining` line (D9).
  let inFlightHere = 0
  const worker = yield* Effect.acquireRelease(
    Effect.sync(() =>
      new Worker(WEBHOOK_QUEUE, (job, token) => {
        inFlightHere += 1
        // Thrown here, outside the effect, so BullMQ sees the error itself: it decides by its class.
        return runPromise(Effect.scoped(attempt(job, token))).then((result) => {
          if (result._tag === "Wait") throw new DelayedError()
          if (result._tag === "Retry") throw new RetryLater(result.error, result.delay)
          if (result._tag === "Fail") throw new UnrecoverableError(result.error)
        }).finally(() => {
          inFlightHere -= 1
        })
      }, {
        connection,
        prefix,
        name: `${hostname()}:${process.pid}`,
        concurrency,
        maxStalledCount,
        stalledInterval: stalledIntervalMs,
        // Renewed every half of it while a delivery waits on its answer, as the settlement worker's are.
        lockDuration: lockDurationMs,
        settings: {
          // The wait the attempt decided (schedule, jitter, Retry-After); BullMQ's own types are not used.
          backoffStrategy: (_attempts, _type, error) => error instanceof RetryLater ? error.delayMs : 0
        }
      })
    ),
    // close() stops taking deliveries and waits for those in flight (each answered within 10 s).
    (worker) =>
      Effect.zipRight(
        Effect.suspend(() => logDraining({ deliveries_in_flight: inFlightHere })),
        Effect.promise(() => worker.close())
      )
  )
  worker.on("error", report)
  yield* Effect.promise(() => worker.waitUntilReady())
  yield* Effect.logInfo("webhook delivery worker started").pipe(Effect.annotateLogs({ concurrency }))
}))
