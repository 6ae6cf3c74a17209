// Each developer's own daily limit (D22), with @account-api/client: an administrator gives every
// member of the account a limit of DAILY_USD (5) a day, in the account's time zone, with one
// limit of their own of three times that (a member's own limit of the same period replaces the
// default for them, higher or lower), and no write is needed when someone joins. It then asks what
// applies to the administrator and to a member, and shows that a reserve of the largest amount
// applies while one cent more is refused.
//   ACCOUNT_API_EMAIL=<an administrator> ACCOUNT_API_PASSWORD=… npx tsx each-developer.ts
// The account's own limits are kept and put back; the two sessions it opens are released.
import { AccountApiClient } from "@account-api/client"
import { SessionRefused, SettlementClient } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}
const daily = setting("DAILY_USD", "5")

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account, user } = await api.me()
const { timezone } = await api.getSettings()

// A limit as PUT takes it back: what it was set with, not what the GET works out.
type Limit = Awaited<ReturnType<typeof api.getLimits>>["limits"][number]
const asItem = (
  { amount_usd, max_open_sessions, period, raise, scope, scope_id, warn_at_percent, window_minutes }: Limit
) => ({
  scope,
  scope_id,
  period,
  ...(window_minutes === null ? {} : { window_minutes }),
  ...(amount_usd === null ? {} : { amount_usd }),
  ...(max_open_sessions === null ? {} : { max_open_sessions }),
  ...(warn_at_percent.length === 0 ? {} : { warn_at_percent }),
  ...(raise === null || Date.parse(raise.until) <= Date.now() ? {} : { raise })
})
const before = await api.getLimits()
const kept = before.limits.map(asItem)
const own = (Number(daily) * 3).toFixed(2)
const set = await api.replaceLimits({
  expected_version: before.version,
  limits: [
    ...kept.filter((limit) => !(limit.scope === "each_user" && limit.period === "day")),
    { scope: "each_user", period: "day", amount_usd: daily },
    { scope: "user", scope_id: user.id, period: "day", amount_usd: own }
  ]
})
console.log(`each user: ${daily} USD a day, resetting at midnight in ${timezone}; ${user.id} has ${own} of their own`)

const prefix = process.env.SETTLEMENT_QUEUE_PREFIX
const settlement = await SettlementClient.connect({
  redisUrl: setting("REDIS_URL", "redis://127.0.0.1:6379"),
  ...(prefix === undefined ? {} : { prefix })
})
try {
  const applies = await api.getEffectiveLimits({ user_id: user.id })
  const byMember = applies.limits.filter((limit) => limit.applies_to === user.id || limit.scope_id === user.id)
  for (const limit of byMember) {
    console.log(`applies as ${limit.applies_as}: ${limit.effective_amount_usd} a day, ${limit.remaining_usd} left`)
  }
  const most = applies.max_reservable_usd
  console.log(`the largest reserve now: ${most ?? "unbounded"}`)
  if (most !== null) {
    // One cent more than the largest is refused before any work runs; the largest itself applies.
    const cent = (Number(most) + 0.01).toFixed(2)
    try {
      await settlement.runSession(
        { account_id: account.id, session_id: `each-${randomUUID()}`, amount_usd: cent, user_id: user.id },
        async () => undefined
      )
      console.log(`reserve of ${cent} applied`)
    } catch (error) {
      if (!(error instanceof SessionRefused)) throw error
      console.log(`reserve of ${cent} refused ${error.status} by the ${error.limit?.scope} limit`)
    }
    await settlement.runSession(
      { account_id: account.id, session_id: `each-${randomUUID()}`, amount_usd: most, user_id: user.id },
      async (session) => console.log(`reserve of ${most} ${session.reserved.status}`)
    )
  }
} finally {
  await settlement.close()
  // The account's limits as they were (a 409 if another administrator changed them meanwhile).
  await api.replaceLimits({ expected_version: set.version, limits: kept })
}
