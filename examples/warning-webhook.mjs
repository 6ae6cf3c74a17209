// A warning before a limit, by webhook (D19), with @account-api/client: an administrator sets a
// daily limit on one label with warn_at_percent [50, 80] and points a webhook endpoint subscribed
// to `limit.approaching` at the receiver this program runs; a session of that label spends past
// half the limit, and the warning arrives, verified before it is used (verifyWebhook: the Standard
// Webhooks signature with `standardwebhooks`, then the event against the catalog).
//   ACCOUNT_API_EMAIL=<an administrator> ACCOUNT_API_PASSWORD=… PORT=3000 node warning-webhook.mjs
// The service delivers to WEBHOOK_URL (http://127.0.0.1:$PORT/ when unset); an http or private
// address only where it runs with WEBHOOK_ALLOW_INSECURE=true (development). The account's limits
// are kept and put back, and the endpoint deleted, at the end.
import { AccountApiClient, verifyWebhook, WebhookVerificationFailed } from "@account-api/client"
import { SettlementClient } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"
import { once } from "node:events"
import { createServer } from "node:http"

const setting = (name, fallback) => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account } = await api.me()

// A label of this run's own: the limit counts this run's session and no other.
const labels = { run: `warning-${randomUUID().slice(0, 8)}` }
const scope_id = `run=${labels.run}`

// The receiver: each delivery verified with the endpoint's secret, then answered 204 at once (any
// 2xx within 10 s is delivered); deliveries come at least once, so they are told apart by webhook-id.
let secret
const seen = new Set()
let warned
const warning = new Promise((resolve) => (warned = resolve))
const server = createServer((request, response) => {
  const chunks = []
  request.on("data", (chunk) => chunks.push(chunk))
  request.on("end", () => {
    try {
      const event = verifyWebhook([secret], Buffer.concat(chunks), request.headers)
      response.writeHead(204).end()
      if (seen.has(event.id)) return
      seen.add(event.id)
      if (event.type === "limit.approaching" && event.data.limit.scope_id === scope_id) warned(event)
    } catch (error) {
      if (!(error instanceof WebhookVerificationFailed)) throw error
      console.log(`refused a delivery: ${error.reason}`)
      response.writeHead(400).end(error.reason)
    }
  })
})
const port = Number(setting("PORT", "3000"))
server.listen(port)
await once(server, "listening")

// A limit as PUT takes it back: what it was set with, not what the GET works out (use, period, effective amount).
const asItem = (limit) =>
  Object.fromEntries(
    ["scope", "scope_id", "period", "window_minutes", "amount_usd", "max_open_sessions", "warn_at_percent", "raise"]
      .map((field) => [field, limit[field]])
      .filter(([field, value]) =>
        value !== null && value !== undefined && !(Array.isArray(value) && value.length === 0) &&
        // A raise that has ended is the base amount again; PUT takes only one still to come.
        !(field === "raise" && Date.parse(value.until) <= Date.now())
      )
  )

const prefix = process.env.SETTLEMENT_QUEUE_PREFIX
const settlement = await SettlementClient.connect({
  redisUrl: setting("REDIS_URL", "redis://127.0.0.1:6379"),
  ...(prefix === undefined ? {} : { prefix })
})
let endpoint
let kept
let set
try {
  endpoint = await api.createWebhook({
    url: setting("WEBHOOK_URL", `http://127.0.0.1:${port}/`),
    types: ["limit.approaching"],
    description: "warning-webhook example"
  })
  secret = endpoint.secret

  // PUT replaces the whole list, under its version: the account's limits stay, this one joins them.
  const before = await api.getLimits()
  kept = before.limits.map(asItem)
  set = await api.replaceLimits({
    expected_version: before.version,
    limits: [...kept, { scope: "label", scope_id, period: "day", amount_usd: "10", warn_at_percent: [50, 80] }]
  })
  console.log(`limit: label ${scope_id}, 10 a day, warnings at 50 % and 80 %`)

  // Holds 2, then three agent steps of 2 each: the label's use goes 2, 2, 4, 6 (spends beyond the
  // hold count as they are booked), so the third step crosses 50 % and 80 % stays ahead.
  await settlement.runSession(
    { account_id: account.id, session_id: `${labels.run}-1`, amount_usd: "2", labels },
    async (session) => {
      for (let step = 1; step <= 3; step++) {
        const result = await session.spend("2", { model: "example-model" })
        console.log(`step ${step}: spend ${result.status}`)
      }
    }
  )
  const timeout = setTimeout(() => warned(undefined), Number(setting("WARNING_WAIT_MS", "30000")))
  const event = await warning
  clearTimeout(timeout)
  if (event === undefined) throw new Error("no limit.approaching arrived in time")
  const { limit, percent, used_usd } = event.data
  console.log(
    `warning ${event.type}: ${percent} % of the ${limit.scope} limit ${limit.scope_id} ` +
      `(${limit.amount_usd} a ${limit.period}), used ${used_usd}`
  )
} finally {
  await settlement.close()
  // The account as it was: its limits (a 409 if another administrator changed them meanwhile), no endpoint.
  if (set !== undefined) await api.replaceLimits({ expected_version: set.version, limits: kept })
  if (endpoint !== undefined) await api.deleteWebhook(endpoint.id)
  server.close()
}
