import { Effect, Schedule } from "effect"
import { Counter, Gauge, Histogram, type MetricValue, Registry } from "prom-client"
import { METRIC_PREFIX, Metrics } from "../Metrics.js"
import { Redis } from "../Redis.js"
import { isSettlementKind } from "./Jobs.js"
import { SettlementQueue } from "./Queue.js"

/** How often a worker adds what it counted to the fleet's totals. */
const PUBLISH_EVERY = "5 seconds"

/** How long a scrape waits for the queue's depth before answering without it. */
const QUEUE_READ_LIMIT_MS = 1_000

const withinMillis = <A>(ms: number, promise: Promise<A>): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/**
 * The fleet's settlement totals: one hash, a field per series
 * (`account_api_settlement_jobs_total{kind="spend",outcome="applied"}`), which
 * every worker increments by what it counted since it last did, and nobody ever
 * deletes. A worker that stops takes nothing away: the totals never go down
 * (D14, D18), and Prometheus never reads a reset.
 */
const totalsKey = (redis: Redis) => redis.key("metrics", "settlement-totals")

interface Family {
  readonly name: string
  readonly help: string
  readonly type: "counter" | "histogram"
}

/** The worker's instruments, in the order the API renders them. */
const FAMILIES = {
  jobs: {
    name: `${METRIC_PREFIX}settlement_jobs_total`,
    help:
      "Settlement jobs finished, by kind and outcome (applied, duplicate, insufficient_funds, nothing_to_release, invalid, retry).",
    type: "counter"
  },
  duration: {
    name: `${METRIC_PREFIX}settlement_job_duration_seconds`,
    help: "Time from a job's start to its result in the worker, by kind.",
    type: "histogram"
  },
  batchSize: {
    name: `${METRIC_PREFIX}settlement_batch_size`,
    help: "Jobs applied per transaction.",
    type: "histogram"
  },
  conflicts: {
    name: `${METRIC_PREFIX}settlement_wallet_conflicts_total`,
    help: "Wallets a batch read again because another writer changed them between its read and its write.",
    type: "counter"
  }
} as const satisfies Record<string, Family>

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, "\\\"").replace(/\n/g, "\\n")

/** A sample as Prometheus writes it, without its value: the hash field it is counted under. */
const seriesOf = (value: MetricValue<string>, family: string) => {
  const labels = Object.entries(value.labels).map(([name, label]) => `${name}="${escapeLabel(String(label))}"`)
  const name = "metricName" in value && typeof value.metricName === "string" ? value.metricName : family
  return labels.length === 0 ? name : `${name}{${labels.join(",")}}`
}

/** A bucket's upper bound, for ordering (`+Inf` last). */
const bucketBound = (series: string) => {
  const le = series.match(/[{,]le="([^"]*)"/)?.[1] ?? "+Inf"
  return le === "+Inf" ? Infinity : Number(le)
}

/**
 * The fleet's totals as Prometheus text: each family's help and type, then its
 * series; a histogram's buckets in order of their bound, then its sum and count.
 */
const renderTotals = (totals: Record<string, string>) => {
  const lines: Array<string> = []
  for (const family of Object.values(FAMILIES)) {
    const series = Object.keys(totals).filter((field) => {
      const name = field.split("{")[0] ?? ""
      return family.type === "counter"
        ? name === family.name
        : [`${family.name}_bucket`, `${family.name}_sum`, `${family.name}_count`].includes(name)
    })
    if (series.length === 0) continue
    const rank = (field: string) =>
      field.startsWith(`${family.name}_bucket`) ? 0 : field.startsWith(`${family.name}_sum`) ? 1 : 2
    const group = (field: string) =>
      field.replace(/^[^{]*/, "").replace(/(?<=[{,])le="[^"]*",?/, "").replace(/^\{\}$/, "")
    series.sort((a, b) => group(a).localeCompare(group(b)) || rank(a) - rank(b) || bucketBound(a) - bucketBound(b))
    lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`)
    for (const field of series) lines.push(`${field} ${totals[field] ?? "0"}`)
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}

/**
 * The worker's instruments. The worker is its own process, so every few
 * seconds (and once more as it stops) it adds what it counted since to the
 * fleet's totals in Redis, and the API's `/metrics` shows those: one scrape
 * target shows settlement beside HTTP (D9), and the totals only ever grow.
 */
export class SettlementMetrics extends Effect.Service<SettlementMetrics>()("Settlement/Metrics", {
  scoped: Effect.gen(function*() {
    const redis = yield* Redis
    const registry = new Registry()
    const jobs = new Counter({
      ...FAMILIES.jobs,
      labelNames: ["kind", "outcome"] as const,
      registers: [registry]
    })
    const duration = new Histogram({
      ...FAMILIES.duration,
      labelNames: ["kind"] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry]
    })
    const batchSize = new Histogram({
      ...FAMILIES.batchSize,
      buckets: [1, 2, 5, 10, 20, 50, 100, 200],
      registers: [registry]
    })
    const conflicts = new Counter({ ...FAMILIES.conflicts, registers: [registry] })
    /** What this worker has added to the totals so far, per series. */
    const published = new Map<string, number>()
    // One publish at a time: each adds the difference from the last one that succeeded.
    const lock = yield* Effect.makeSemaphore(1)
    const publish = lock.withPermits(1)(Effect.tryPromise(async () => {
      const now = new Map<string, number>()
      for (const metric of await registry.getMetricsAsJSON()) {
        for (const value of metric.values) now.set(seriesOf(value, metric.name), value.value)
      }
      const increments = [...now].flatMap(([series, value]) => {
        const before = published.get(series)
        // A series new to this worker is written even at zero, so a histogram shows all its buckets.
        return before === undefined || value !== before ? [[series, value - (before ?? 0)] as const] : []
      })
      if (increments.length === 0) return
      // One transaction on one key: all of a publish counts, or none of it (and the next one retries it).
      const transaction = redis.client.multi()
      for (const [series, increment] of increments) transaction.hincrbyfloat(totalsKey(redis), series, increment)
      const replies = await transaction.exec()
      if (replies === null || replies.some(([error]) => error !== null)) throw new Error("the totals were not updated")
      for (const [series] of increments) published.set(series, now.get(series) ?? 0)
    })).pipe(Effect.ignore)
    yield* publish.pipe(Effect.repeat(Schedule.spaced(PUBLISH_EVERY)), Effect.forkScoped)
    // What was counted since the last publish goes out on shutdown, so a worker that stops takes nothing away.
    yield* Effect.addFinalizer(() => publish)
    return {
      /** `name` is whatever a producer sent: a name the worker does not know counts as `unknown` (D9: bounded labels). */
      recordJob: (name: string, outcome: string, seconds: number) => {
        const kind = isSettlementKind(name) ? name : "unknown"
        jobs.inc({ kind, outcome })
        duration.observe({ kind }, seconds)
      },
      recordBatch: (size: number) => batchSize.observe(size),
      recordConflicts: (wallets: number) => conflicts.inc(wallets),
      /** Adds what was counted since the last publish to the fleet's totals now. */
      publish
    } as const
  }),
  dependencies: [Redis.Default]
}) {}

/**
 * API side: queue depth by state, read from BullMQ at scrape time, and the
 * fleet's settlement totals.
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
    /** The fleet's settlement totals, as every worker has added to them. */
    const workerSnapshots = Effect.tryPromise(() => redis.client.hgetall(totalsKey(redis))).pipe(
      Effect.map(renderTotals),
      Effect.orElseSucceed(() => "")
    )
    return { workerSnapshots } as const
  }),
  dependencies: [Redis.Default, SettlementQueue.Default]
}) {}
