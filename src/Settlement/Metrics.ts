import { Clock, Effect, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Histogram,
  type MetricObjectWithValues,
  type MetricValue,
  Registry
} from "prom-client"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { Redis } from "../Redis.js"
import { isSettlementKind } from "./Jobs.js"
import { SettlementQueue } from "./Queue.js"

type MetricsJson = Array<MetricObjectWithValues<MetricValue<string>>>

/** How often a worker publishes its counters, and how long a silent worker's last figures are kept. */
const PUBLISH_EVERY = "5 seconds"
const SNAPSHOT_TTL_SECONDS = 60

/** How long a scrape waits for the queue's depth before answering without it. */
const QUEUE_READ_LIMIT_MS = 1_000

const withinMillis = <A>(ms: number, promise: Promise<A>): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** One hash, a field per worker: read with one command, never a key scan. */
const snapshotsKey = (redis: Redis) => redis.key("metrics", "settlement-workers")

interface Snapshot {
  readonly at: number
  readonly metrics: MetricsJson
}

/**
 * The worker's instruments. The worker is its own process, so it publishes a
 * snapshot of them to Redis and the API's `/metrics` sums the live workers'
 * snapshots: one scrape target shows settlement beside HTTP (D9).
 */
export class SettlementMetrics extends Effect.Service<SettlementMetrics>()("Settlement/Metrics", {
  scoped: Effect.gen(function*() {
    const redis = yield* Redis
    const registry = new Registry()
    const jobs = new Counter({
      name: `${METRIC_PREFIX}settlement_jobs_total`,
      help:
        "Settlement jobs finished, by kind and outcome (applied, duplicate, insufficient_funds, nothing_to_release, invalid, retry).",
      labelNames: ["kind", "outcome"] as const,
      registers: [registry]
    })
    const duration = new Histogram({
      name: `${METRIC_PREFIX}settlement_job_duration_seconds`,
      help: "Time from a job's start to its result in the worker, by kind.",
      labelNames: ["kind"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry]
    })
    const batchSize = new Histogram({
      name: `${METRIC_PREFIX}settlement_batch_size`,
      help: "Jobs applied per transaction.",
      buckets: [1, 2, 5, 10, 20, 50, 100, 200],
      registers: [registry]
    })
    const workerId = randomUUID()
    const publish = Effect.flatMap(Clock.currentTimeMillis, (at) =>
      Effect.tryPromise(async () => {
        const snapshot: Snapshot = { at, metrics: await registry.getMetricsAsJSON() }
        await redis.client.hset(snapshotsKey(redis), workerId, JSON.stringify(snapshot))
      })).pipe(Effect.ignore)
    yield* publish.pipe(Effect.repeat(Schedule.spaced(PUBLISH_EVERY)), Effect.forkScoped)
    // The last figures go out on shutdown too, so a scrape after a deploy still counts them until they expire.
    yield* Effect.addFinalizer(() => publish)
    return {
      /** `name` is whatever a producer sent: a name the worker does not know counts as `unknown` (D9: bounded labels). */
      recordJob: (name: string, outcome: string, seconds: number) => {
        const kind = isSettlementKind(name) ? name : "unknown"
        jobs.inc({ kind, outcome })
        duration.observe({ kind }, seconds)
      },
      recordBatch: (size: number) => batchSize.observe(size)
    } as const
  }),
  dependencies: [Redis.Default]
}) {}

/**
 * API side: queue depth by state, read from BullMQ at scrape time, and the
 * live workers' published counters, summed.
 */
export class SettlementMetricsReader extends Effect.Service<SettlementMetricsReader>()("Settlement/MetricsReader", {
  effect: Effect.gen(function*() {
    const metrics = yield* Metrics
    const redis = yield* Redis
    const queue = yield* SettlementQueue
    // One read of the queue per scrape, shared by both gauges (a scrape collects them at once). The
    // queue's connection waits for Redis as long as it takes; a scrape must not.
    let reading: Promise<Record<string, number> | undefined> | undefined
    const readDepth = () =>
      reading ??= withinMillis(
        QUEUE_READ_LIMIT_MS,
        queue.getJobCounts("waiting", "active", "delayed", "failed", "completed")
      )
        .catch(() => undefined)
        .finally(() => {
          reading = undefined
        })
    new Gauge({
      name: `${METRIC_PREFIX}queue_jobs`,
      help: "Jobs in the settlement queue, by state.",
      labelNames: ["state"] as const,
      registers: [metrics.registry],
      async collect() {
        const counts = await readDepth()
        this.reset()
        for (const [state, count] of Object.entries(counts ?? {})) this.set({ state }, count)
      }
    })
    new Gauge({
      name: `${METRIC_PREFIX}queue_metrics_available`,
      help:
        "1 when this scrape could read the settlement queue's depth from Redis, 0 when it could not (the depth is then left out).",
      registers: [metrics.registry],
      async collect() {
        this.set((await readDepth()) === undefined ? 0 : 1)
      }
    })
    const workerSnapshots = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.tryPromise(async () => {
        const key = snapshotsKey(redis)
        const fields = await redis.client.hgetall(key)
        const live: Array<MetricsJson> = []
        for (const [workerId, value] of Object.entries(fields)) {
          const snapshot = JSON.parse(value) as Snapshot
          if (now - snapshot.at <= SNAPSHOT_TTL_SECONDS * 1000) live.push(snapshot.metrics)
          else await redis.client.hdel(key, workerId)
        }
        return live.length === 0 ? "" : await AggregatorRegistry.aggregate(live).metrics()
      })).pipe(Effect.orElseSucceed(() => ""))
    return { workerSnapshots } as const
  }),
  dependencies: [Redis.Default, SettlementQueue.Default]
}) {}
