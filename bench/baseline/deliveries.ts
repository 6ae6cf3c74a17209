import { createHmac } from "node:crypto"
import { createInterface } from "node:readline"
import pg from "pg"

/**
 * The floor under a webhook delivery: a minimal loop that takes an account's logged events, signs
 * each as Standard Webhooks says (`standardwebhooks`' scheme: HMAC-SHA256 over
 * `id.timestamp.body` with the endpoint's secret, base64, `v1,` before it), POSTs it with Node's
 * fetch (undici) and records the attempt in `webhook_deliveries`, as many at once as the webhooks
 * process delivers (WEBHOOK_CONCURRENCY's default). No queue, no relay cursor, no retries, no
 * Effect: what a delivery costs the webhooks process beyond this is its own machinery.
 *
 * Run by the settlement suite as a process of its own, so its CPU is its own. Each line on stdin
 * asks for one round, as JSON ({ account_id, endpoint_id, url, after_position, count }); it
 * answers `delivered <n>` on stdout when the last attempt is recorded.
 */

const CONCURRENCY = 50

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 8 })
pool.on("error", (error) => process.stderr.write(`delivery baseline: ${error.message}\n`))

interface Round {
  readonly account_id: string
  readonly endpoint_id: string
  readonly url: string
  readonly after_position: number
  readonly count: number
}

interface EventRow {
  readonly id: string
  readonly type: string
  readonly data: string
  readonly created_at: string
}

const sign = (key: Buffer, id: string, timestamp: number, body: string) =>
  `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`

const deliver = async (round: Round): Promise<number> => {
  const { rows: [endpoint] } = await pool.query<{ readonly secret: string }>(
    `SELECT secret FROM webhook_endpoints WHERE id = $1`,
    [round.endpoint_id]
  )
  if (endpoint === undefined) throw new Error(`no endpoint ${round.endpoint_id}`)
  const key = Buffer.from(endpoint.secret.replace(/^whsec_/, ""), "base64")
  const { rows: events } = await pool.query<EventRow>(
    `SELECT id::text, type, data::text, to_json(created_at)#>>'{}' AS created_at FROM account_events
     WHERE account_id = $1 AND position > $2 ORDER BY position LIMIT $3`,
    [round.account_id, round.after_position, round.count]
  )
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let index = next++; index < events.length; index = next++) {
      const event = events[index]
      if (event === undefined) continue
      const body = `{"type":${JSON.stringify(event.type)},"timestamp":${
        JSON.stringify(event.created_at)
      },"data":${event.data}}`
      const timestamp = Math.floor(Date.now() / 1000)
      const begun = performance.now()
      const response = await fetch(round.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": event.id,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": sign(key, event.id, timestamp, body)
        },
        body
      })
      await response.arrayBuffer()
      await pool.query(
        `INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, attempt, outcome, status_code, duration_ms)
         VALUES ($1, $2, $3, 1, $4, $5, $6)`,
        [
          round.endpoint_id,
          event.id,
          event.type,
          response.ok ? "delivered" : "failed",
          response.status,
          Math.round(performance.now() - begun)
        ]
      )
    }
  }))
  return events.length
}

const lines = createInterface({ input: process.stdin })
lines.on("line", (line) => {
  deliver(JSON.parse(line) as Round).then(
    (count) => process.stdout.write(`delivered ${count}\n`),
    (error: unknown) => process.stdout.write(`failed ${error instanceof Error ? error.message : String(error)}\n`)
  )
})
lines.on("close", () => {
  void pool.end().then(() => process.exit(0))
})
process.stdout.write("ready\n")
