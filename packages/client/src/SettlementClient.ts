import { Queue, QueueEvents } from "bullmq"
import { Cause, Context, type Duration, Effect, Exit, Layer, ManagedRuntime, type Scope } from "effect"
import { Redis as IORedis } from "ioredis"
import type { Labels } from "../../../src/Domain/Labels.js"
import {
  type ExtendPayload,
  type ReachedLimit,
  type ReleasePayload,
  type ReservePayload,
  SETTLEMENT_QUEUE,
  type SettlementResult,
  type SpendPayload
} from "../../../src/Settlement/Jobs.js"
import { makeProducer } from "../../../src/Settlement/ProducerCore.js"
import type { SettlementEnqueueError, SettlementJobIdTaken } from "../../../src/Settlement/ProducerErrors.js"

/**
 * The settlement producer (D8) for session runners: the service's own producer core, on a Redis
 * connection of the runner's. Jobs go to the `settlement` queue with the contract's options
 * (10 attempts, exponential backoff from 500 ms), a job id derived from the account and the key,
 * and the check that the job read back under that id is the one sent.
 */

export interface SettlementOptions {
  /** The service's Redis: `redis://127.0.0.1:6379`. */
  readonly redisUrl: string
  /** The queue's key prefix (`SETTLEMENT_QUEUE_PREFIX`); BullMQ's default `bull` when omitted. */
  readonly prefix?: string
  /** A result wait that hears nothing for this long adds the job again, in case Redis lost it; 5 s when omitted. */
  readonly recoverAfter?: Duration.DurationInput
}

export type SettlementError = SettlementEnqueueError | SettlementJobIdTaken

/**
 * A job enqueued. Declared here, not inferred from the producer's core, so the package's types
 * name nothing of BullMQ: they hold without BullMQ's declarations (and the Node types those need).
 */
export interface Enqueued {
  /** Waits for the worker's result; fails if the job fails for good or the wait times out (30 s unless given). */
  readonly result: (timeout?: Duration.DurationInput) => Effect.Effect<SettlementResult, SettlementError>
}

/** The producer's operations: each enqueues its job; `result()` waits for the worker's answer. */
export interface Producer {
  readonly enqueueReserve: (payload: ReservePayload) => Effect.Effect<Enqueued, SettlementError>
  readonly enqueueSpend: (payload: SpendPayload) => Effect.Effect<Enqueued, SettlementError>
  readonly enqueueRelease: (payload: ReleasePayload) => Effect.Effect<Enqueued, SettlementError>
  /** The hold's heartbeat (D12): keeps an open session's hold from lapsing. */
  readonly enqueueExtend: (payload: ExtendPayload) => Effect.Effect<Enqueued, SettlementError>
}

/** The producer as an Effect service; `SettlementProducer.layer(options)` opens and closes its connections. */
export class SettlementProducer extends Context.Tag("@account-api/client/SettlementProducer")<
  SettlementProducer,
  Producer
>() {
  static layer(options: SettlementOptions): Layer.Layer<SettlementProducer> {
    return Layer.scoped(SettlementProducer, make(options))
  }
}

const make = (options: SettlementOptions): Effect.Effect<Producer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const prefix = options.prefix === undefined ? {} : { prefix: options.prefix }
    const connection = yield* Effect.acquireRelease(
      // BullMQ needs `maxRetriesPerRequest: null`: its blocking commands wait indefinitely.
      Effect.sync(() => new IORedis(options.redisUrl, { maxRetriesPerRequest: null })),
      (connection) => Effect.promise(() => connection.quit().catch(() => "OK"))
    )
    const queue = yield* Effect.acquireRelease(
      Effect.sync(() => new Queue(SETTLEMENT_QUEUE, { connection, ...prefix })),
      (queue) => Effect.promise(() => queue.close())
    )
    const events = yield* Effect.acquireRelease(
      Effect.sync(() => new QueueEvents(SETTLEMENT_QUEUE, { connection, ...prefix })),
      (events) => Effect.promise(() => events.close())
    )
    // Without listeners, Node treats an error event as a crash; ioredis reconnects by itself.
    const ignore = () => {}
    connection.on("error", ignore)
    queue.on("error", ignore)
    events.on("error", ignore)
    yield* Effect.promise(() => events.waitUntilReady())
    return makeProducer({ queue, events, recoverAfter: options.recoverAfter ?? "5 seconds" })
  })

export type { ExtendPayload, ReleasePayload, ReservePayload, SettlementResult, SpendPayload }

/** What a session's spend may say beside its amount. */
export interface SpendOptions {
  /** The model the spend paid for (D19): 1–100 printable characters, on its ledger entry and in the spend report. */
  readonly model?: string
}

/** What `runSession` hands the work: the reserve's result and the session's spend. */
export interface Session {
  readonly account_id: string
  readonly session_id: string
  readonly reserved: SettlementResult
  /**
   * Books a spend of the session (key `<key prefix>-spend-<n>`), with the model it paid for when
   * given. Spends are never refused (the work is done); one whose result says `cap_reached` aborts `signal`.
   */
  readonly spend: (amount_usd: string, options?: SpendOptions) => Promise<SettlementResult>
  /**
   * Aborted, with a `SessionCapReached` as its reason, once a spend answers `cap_reached` (D16):
   * the session has spent its cap, and the work should stop its agent.
   */
  readonly signal: AbortSignal
}

export interface RunSessionOptions {
  readonly account_id: string
  readonly session_id: string
  readonly task_id?: string
  /** The hold: a decimal string above zero. */
  readonly amount_usd: string
  /** The session's repository, one of the account's (D16); the reserve fails `repository_not_found` otherwise. */
  readonly repository_id?: string
  /** The session's user, one of the account's (D16); the reserve fails `user_not_found` otherwise. */
  readonly user_id?: string
  /**
   * The session's cap (D16): the most it may hold plus spend, a decimal string above zero. A hold
   * past it is refused (`limit_reached`, a `SessionRefused`); a spend reaching it aborts `signal`.
   */
  readonly max_usd?: string
  /**
   * The session's labels (D19): at most 10 keys (`^[a-z][a-z0-9_.-]{0,39}$`) to values of 1–100
   * characters without control characters, on its entries and sessions, in the spend report, and
   * counted by the account's `label` limits (`scope_id` `key=value`).
   */
  readonly labels?: Labels
  /** Idempotency keys are `<keyPrefix>-reserve`, `-spend-<n>`, `-extend-<n>`, `-release`; the session id when omitted. */
  readonly keyPrefix?: string
  /** How often the hold is extended while the work runs; 60 s when omitted. */
  readonly heartbeatMs?: number
  /** The hold's new lifetime at each heartbeat (60–604800); the service's RESERVATION_TTL_SECONDS when omitted. */
  readonly ttlSeconds?: number
  /** How long each job's result is waited for; 30 s when omitted. */
  readonly timeout?: Duration.DurationInput
}

/**
 * The reserve was answered without a hold (`insufficient_funds`, `limit_reached`, `session_closed`):
 * the work did not run. `limit` is the limit a `limit_reached` reserve would have passed (a
 * concurrency limit's `period` is `concurrent`, with `max_open_sessions` and the `open_sessions`
 * it found); `max_reservable_usd` the largest reserve that could have been taken then (D19),
 * "0.000000" when none, on `limit_reached` and `insufficient_funds`; `retry_after_seconds`, for a
 * rolling limit's refusal (D22), when a reserve of that size fits again (null: never), undefined
 * for the others.
 */
export class SessionRefused extends Error {
  override readonly name = "SessionRefused"
  readonly status: SettlementResult["status"]
  readonly limit: ReachedLimit | undefined
  readonly max_reservable_usd: string | undefined
  readonly retry_after_seconds: number | null | undefined
  constructor(readonly result: SettlementResult) {
    super(`the session's reserve was answered ${result.status}${refusalDetail(result)}; the work did not run`)
    this.status = result.status
    this.limit = result.limit
    this.max_reservable_usd = result.max_reservable_usd
    this.retry_after_seconds = result.retry_after_seconds
  }
}

/** A refusal's limit and what would have fit, for the error's message. */
const refusalDetail = ({ limit, max_reservable_usd, retry_after_seconds }: SettlementResult): string =>
  [
    limit === undefined ? "" : ` by the ${limit.scope} ${limit.period} limit`,
    max_reservable_usd === undefined ? "" : ` (at most ${max_reservable_usd} could be reserved)`,
    typeof retry_after_seconds === "number" ? `, retry after ${retry_after_seconds} s` : ""
  ].join("")

/** A spend answered `cap_reached` (D16): the reason `Session.signal` is aborted with. */
export class SessionCapReached extends Error {
  override readonly name = "SessionCapReached"
  constructor(readonly result: SettlementResult) {
    super("the session has spent its cap; stop its work")
  }
}

/**
 * The producer for promise code: `await SettlementClient.connect({ redisUrl })`, then `reserve`,
 * `spend`, `release`, `extend` (each resolves with the job's typed result once the worker has
 * applied it) or `runSession`. Failures reject with `SettlementEnqueueError` or `SettlementJobIdTaken`.
 */
export class SettlementClient {
  readonly #runtime: ManagedRuntime.ManagedRuntime<SettlementProducer, never>

  private constructor(runtime: ManagedRuntime.ManagedRuntime<SettlementProducer, never>) {
    this.#runtime = runtime
  }

  static async connect(options: SettlementOptions): Promise<SettlementClient> {
    const runtime = ManagedRuntime.make(SettlementProducer.layer(options))
    await runtime.runtime()
    return new SettlementClient(runtime)
  }

  async #run<A>(effect: Effect.Effect<A, SettlementError, SettlementProducer>): Promise<A> {
    const exit = await this.#runtime.runPromiseExit(effect)
    if (Exit.isSuccess(exit)) return exit.value
    throw Cause.squash(exit.cause)
  }

  #enqueue(enqueue: (producer: Producer) => ReturnType<Producer["enqueueReserve"]>): Promise<Enqueued> {
    return this.#run(Effect.flatMap(SettlementProducer, enqueue))
  }

  async #settle(
    enqueue: (producer: Producer) => ReturnType<Producer["enqueueReserve"]>,
    timeout: Duration.DurationInput | undefined
  ): Promise<SettlementResult> {
    return this.#run((await this.#enqueue(enqueue)).result(timeout))
  }

  reserve(payload: ReservePayload, timeout?: Duration.DurationInput): Promise<SettlementResult> {
    return this.#settle((producer) => producer.enqueueReserve(payload), timeout)
  }

  spend(payload: SpendPayload, timeout?: Duration.DurationInput): Promise<SettlementResult> {
    return this.#settle((producer) => producer.enqueueSpend(payload), timeout)
  }

  release(payload: ReleasePayload, timeout?: Duration.DurationInput): Promise<SettlementResult> {
    return this.#settle((producer) => producer.enqueueRelease(payload), timeout)
  }

  /** The hold's heartbeat (D12). */
  extend(payload: ExtendPayload, timeout?: Duration.DurationInput): Promise<SettlementResult> {
    return this.#settle((producer) => producer.enqueueExtend(payload), timeout)
  }

  /**
   * Reserves, runs `work` while extending the hold every `heartbeatMs`, and releases the rest of
   * the hold in every outcome (work done, work thrown, reserve refused); answers what `work` answers.
   * A reserve that could not be enqueued (its payload invalid, its job id another job's, Redis
   * unreachable) rejects at once, without the work or a release, which would only wait for a
   * session the worker never heard of; a hold such a reserve left after all lapses by its TTL (D12).
   */
  async runSession<T>(options: RunSessionOptions, work: (session: Session) => Promise<T>): Promise<T> {
    const { account_id, session_id, timeout } = options
    const key = (suffix: string) => `${options.keyPrefix ?? session_id}-${suffix}`
    let spends = 0
    let heartbeats = 0
    let timer: ReturnType<typeof setInterval> | undefined
    let outcome: { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown }
    const reserve = await this.#enqueue((producer) =>
      producer.enqueueReserve({
        account_id,
        session_id,
        ...(options.task_id === undefined ? {} : { task_id: options.task_id }),
        ...(options.repository_id === undefined ? {} : { repository_id: options.repository_id }),
        ...(options.user_id === undefined ? {} : { user_id: options.user_id }),
        ...(options.max_usd === undefined ? {} : { max_usd: options.max_usd }),
        ...(options.labels === undefined ? {} : { labels: options.labels }),
        amount_usd: options.amount_usd,
        idempotency_key: key("reserve")
      })
    )
    try {
      const reserved = await this.#run(reserve.result(timeout))
      const held = reserved.status === "applied" ||
        (reserved.status === "duplicate" && reserved.first_status === "applied")
      if (!held) throw new SessionRefused(reserved)
      timer = setInterval(() => {
        heartbeats += 1
        // A missed heartbeat is not the work's failure: the next one extends the hold all the same.
        this.extend({
          account_id,
          session_id,
          idempotency_key: key(`extend-${heartbeats}`),
          ...(options.ttlSeconds === undefined ? {} : { ttl_seconds: options.ttlSeconds })
        }, timeout).catch(() => {})
      }, options.heartbeatMs ?? 60_000)
      const capped = new AbortController()
      const value = await work({
        account_id,
        session_id,
        reserved,
        signal: capped.signal,
        spend: async (amount_usd, spendOptions) => {
          spends += 1
          const model = spendOptions?.model
          const result = await this.spend(
            {
              account_id,
              session_id,
              amount_usd,
              idempotency_key: key(`spend-${spends}`),
              ...(model === undefined ? {} : { model })
            },
            timeout
          )
          if (result.cap_reached === true && !capped.signal.aborted) capped.abort(new SessionCapReached(result))
          return result
        }
      })
      outcome = { ok: true, value }
    } catch (error) {
      outcome = { ok: false, error }
    }
    if (timer !== undefined) clearInterval(timer)
    try {
      await this.release({ account_id, session_id, idempotency_key: key("release") }, timeout)
    } catch (error) {
      // The work's own failure says more than the release's that followed it.
      if (outcome.ok) throw error
    }
    if (!outcome.ok) throw outcome.error
    return outcome.value
  }

  /** Closes the connections. */
  close(): Promise<void> {
    return this.#runtime.dispose()
  }
}
