import { Queue } from "bullmq"
import { Redis } from "ioredis"
import { programCommand } from "../../scripts/programs.mjs"
import { SETTLEMENT_QUEUE } from "../../src/Settlement/Jobs.js"
import { WEBHOOK_QUEUE } from "../../src/Webhooks/Queue.js"
import { type Command, type ProgramProcess, startProgram } from "./child.js"
import type { Cleanup } from "./cleanup.js"
import { createRedisPrefix, redisUrl } from "./stores.js"

/** A queue process under test (the settlement worker, the webhooks process), on a Redis prefix. */
export interface WorkerProcess extends ProgramProcess {
  /** The process's Redis prefix: producers must use the same one to reach it. */
  readonly redisPrefix: string
}

export interface WorkerOptions {
  readonly databaseUrl: string
  readonly cleanup: Cleanup
  /** Extra settings, e.g. `SETTLEMENT_CONCURRENCY`. */
  readonly env?: Readonly<Record<string, string>>
  /** Extra `node` flags, such as `--cpu-prof`. */
  readonly nodeArgs?: ReadonlyArray<string>
}

/** Long enough for the worker to finish the jobs it holds (D8: SIGTERM drains). */
const STOP_TIMEOUT_MS = 30_000

/**
 * Starts the settlement worker as `npm start` runs it (`programCommand`) and
 * waits until it has registered with BullMQ. It has no HTTP port; readiness is
 * its blocking connection showing up among the queue's workers.
 */
export const startSettlementWorker = (
  options: WorkerOptions & {
    /** Another worker's prefix, for a second worker on the same queue; a prefix of its own otherwise. */
    readonly redisPrefix?: string
  }
): Promise<WorkerProcess> =>
  startQueueWorker(
    "worker",
    programCommand("worker", { nodeArgs: options.nodeArgs ?? [] }),
    SETTLEMENT_QUEUE,
    options.redisPrefix ?? createRedisPrefix(options.cleanup),
    options
  )

/**
 * Starts the webhooks process (the relay and the deliveries, D17) as `npm start` runs it, on the
 * settlement worker's Redis prefix (where redeliveries queue too), and waits until its delivery
 * worker has registered with the `webhooks` queue.
 */
export const startWebhooksProcess = (options: WorkerOptions & { readonly redisPrefix: string }) =>
  startQueueWorker(
    "webhooks",
    programCommand("webhooks", { nodeArgs: options.nodeArgs ?? [] }),
    WEBHOOK_QUEUE,
    options.redisPrefix,
    options
  )

/** The no-op worker (bench/noop/worker.ts): the same queue and settings, a processor that returns at once. */
export const startNoopWorker = (options: WorkerOptions): Promise<WorkerProcess> =>
  startQueueWorker(
    "no-op worker",
    [process.execPath, ["--import", "tsx", "bench/noop/worker.ts"]],
    SETTLEMENT_QUEUE,
    createRedisPrefix(options.cleanup),
    options
  )

const startQueueWorker = async (
  name: string,
  command: Command,
  queueName: string,
  redisPrefix: string,
  options: WorkerOptions
): Promise<WorkerProcess> => {
  const connection = new Redis(redisUrl(), { maxRetriesPerRequest: null })
  const queue = new Queue(queueName, { connection, prefix: redisPrefix })
  // Ready once it has joined the workers already on the queue (a second worker joins the first).
  const workersBefore = await queue.getWorkersCount()
  try {
    const program = await startProgram({
      name,
      command,
      env: {
        DATABASE_URL: options.databaseUrl,
        REDIS_URL: redisUrl(),
        REDIS_PREFIX: redisPrefix,
        SETTLEMENT_QUEUE_PREFIX: redisPrefix,
        // As the API in the stack: a line per job at info would measure the log pipe.
        LOG_LEVEL: "warning",
        ...options.env
      },
      stopTimeoutMs: STOP_TIMEOUT_MS,
      cleanup: options.cleanup,
      whyNotReady: async () =>
        (await queue.getWorkersCount()) > workersBefore ? undefined : `no worker registered with the ${queueName} queue`
    })
    return { ...program, redisPrefix }
  } finally {
    await queue.close()
    connection.disconnect()
  }
}
