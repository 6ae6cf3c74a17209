// A runner that asks what applies before it starts a session (D22), with @account-api/client: it
// reads the limits a session of its user, repository and labels would be judged by, with what each
// leaves, and reserves WANT_USD (2) or the largest reserve it could take now, if that is less. A
// refusal by a rolling limit says when a reserve of its size fits again (retry_after_seconds).
//   ACCOUNT_API_EMAIL=<a member> ACCOUNT_API_PASSWORD=… npx tsx what-applies.ts
// LABELS (team:example) are the session's labels. It spends 0.10 and releases the rest.
import { AccountApiClient } from "@account-api/client"
import { SessionRefused, SettlementClient } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}
const want = Number(setting("WANT_USD", "2"))
const labelText = setting("LABELS", "team:example")
const labels = Object.fromEntries(labelText.split(",").map((pair) => pair.split(":", 2) as [string, string]))

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account, user } = await api.me()

const applies = await api.getEffectiveLimits({ user_id: user.id, labels: labelText })
for (const limit of applies.limits) {
  const left = limit.remaining_usd === null ? `${limit.open_sessions} open` : `${limit.remaining_usd} left`
  console.log(`limit ${limit.applies_as} ${limit.period}: ${left}`)
}
const most = applies.max_reservable_usd
const amount = most === null ? want : Math.min(want, Number(most))
console.log(
  `funds ${applies.funds_usd ?? "not enforced"}; the largest reserve ${most ?? "unbounded"}; reserving ${
    amount.toFixed(2)
  }`
)
if (amount <= 0) process.exit(0)

const prefix = process.env.SETTLEMENT_QUEUE_PREFIX
const settlement = await SettlementClient.connect({
  redisUrl: setting("REDIS_URL", "redis://127.0.0.1:6379"),
  ...(prefix === undefined ? {} : { prefix })
})
try {
  await settlement.runSession(
    {
      account_id: account.id,
      session_id: `applies-${randomUUID()}`,
      amount_usd: amount.toFixed(2),
      user_id: user.id,
      labels
    },
    async (session) => {
      const spent = await session.spend("0.10")
      console.log(`session ran: reserve ${session.reserved.status}, spend ${spent.status}`)
    }
  )
} catch (error) {
  if (!(error instanceof SessionRefused)) throw error
  const retry = typeof error.retry_after_seconds === "number" ? `; retry after ${error.retry_after_seconds} s` : ""
  console.log(`session refused ${error.status}${retry}`)
} finally {
  await settlement.close()
}
