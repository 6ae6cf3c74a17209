// A session runner on plain BullMQ (npm install bullmq ioredis), no client package: the queue
// `settlement`, the job names and payloads of the contract, and the options the typed producer sets.
//   ACCOUNT_ID=<GET /auth/me → account.id> node plain-bullmq.mjs
import { Queue, QueueEvents } from "bullmq"
import { Redis } from "ioredis"

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

const settle = async (name, data) => {
  console.log(`send ${JSON.stringify({ name, data, options })}`)
  const job = await queue.add(name, data, options)
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
