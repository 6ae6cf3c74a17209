// A session runner on plain BullMQ (npm install bullmq ioredis), no client package: the queue
// `settlement`, the job names and payloads of the contract, and the options the typed producer sets.
//   ACCOUNT_ID=<GET /auth/me → account.id> node plain-bullmq.mjs
// It leaves its session on the books, closed, 1.25 USD spent; a credit of 1.25 puts the
// wallet's available back if you want it.
import { Queue, QueueEvents } from "bullmq"
import { Redis } from "ioredis"
import { createHash } from "node:crypto"

const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const prefix = process.env.SETTLEMENT_QUEUE_PREFIX // BullMQ's default, `bull`, when unset: the service's too
const account_id = process.env.ACCOUNT_ID
if (account_id === undefined) throw new Error("set ACCOUNT_ID")
const session_id = process.env.SESSION_ID ?? `sess-${Date.now()}`

// BullMQ needs maxRetriesPerRequest: null on the connection it blocks on.
const connection = new Redis(redisUrl, { maxRetriesPerRequest: null })
const queue = new Queue("settlement", { connection, ...(prefix ? { prefix } : {}) })
const events = new QueueEvents("settlement", { connection, ...(prefix ? { prefix } : {}) })
const options = { attempts: 10, backoff: { type: "exponential", delay: 500 } }

// The typed producer's job id: the account and the key together (keys are per account), no `:`.
const jobIdOf = (key) => `settle-${createHash("sha256").update(`${account_id}\n${key}`).digest("base64url")}`

// BullMQ keeps the first job added under an id, whoever added it: the fields of the job stored
// there that differ from the job sent (none when it is this job, sent before).
const differences = (name, data, stored) => {
  const fields = [...new Set([...Object.keys(data), ...Object.keys(stored.data ?? {})])].sort()
  return [
    ...(stored.name === name ? [] : ["kind"]),
    ...fields.filter((field) => JSON.stringify(data[field]) !== JSON.stringify(stored.data?.[field]))
  ]
}

const settle = async (name, data) => {
  const jobId = jobIdOf(data.idempotency_key)
  console.log(`send ${JSON.stringify({ name, data, options, jobId })}`)
  const job = await queue.add(name, data, { ...options, jobId })
  // Read back before taking a result: another job's result is not this one's.
  const stored = await queue.getJob(jobId)
  const differ = stored === undefined ? [] : differences(name, data, stored)
  if (differ.length > 0) {
    throw new Error(`job ${jobId} is another job (its ${differ.join(", ")} differ): this ${name} was not enqueued`)
  }
  const result = await job.waitUntilFinished(events, 30_000)
  console.log(`${name} ${result.status}: reserved ${result.wallet.reserved_usd}, spent ${result.wallet.spent_usd}`)
  return result
}

try {
  await events.waitUntilReady()
  await settle("reserve", { account_id, session_id, amount_usd: "5", idempotency_key: `${session_id}-reserve` })
  await settle("spend", { account_id, session_id, amount_usd: "1.25", idempotency_key: `${session_id}-spend-1` })
  await settle("release", { account_id, session_id, idempotency_key: `${session_id}-release` })
} finally {
  // Closed, the connections let the process exit.
  await events.close()
  await queue.close()
  await connection.quit()
}
