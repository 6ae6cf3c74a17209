import { Worker } from "bullmq"
import { Redis } from "ioredis"
import { SETTLEMENT_JOB_RETENTION, SETTLEMENT_QUEUE } from "../../src/Settlement/Jobs.js"

/**
 * The floor under a settlement job: a BullMQ worker on the same queue, with the connection
 * settings, concurrency and retention the service's worker uses, whose processor returns at
 * once. What a job costs the real worker beyond this is the service's own work.
 */

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const prefix = process.env.SETTLEMENT_QUEUE_PREFIX ?? "bull"
const concurrency = Number(process.env.SETTLEMENT_CONCURRENCY ?? 256)

const connection = new Redis(url, { maxRetriesPerRequest: null })
connection.on("error", () => {})
const worker = new Worker(SETTLEMENT_QUEUE, async () => ({ status: "applied", entry_ids: [], wallet: {} }), {
  connection,
  prefix,
  concurrency,
  autorun: true,
  ...SETTLEMENT_JOB_RETENTION
})
worker.on("error", () => {})

process.once("SIGTERM", () => {
  void worker.close().then(() => connection.quit()).then(() => process.exit(0))
})
