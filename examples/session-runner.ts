// A session runner on @account-api/client: sign in over HTTP, then reserve, spend and release a
// session through the settlement queue, typed end to end. Run with the service up:
//   ACCOUNT_API_EMAIL=… ACCOUNT_API_PASSWORD=… npx tsx session-runner.ts
// It leaves its session on the books, closed, 1.25 USD spent (the ledger's entries stay); a credit
// of 1.25 puts the wallet's available back if you want it.
import { AccountApiClient } from "@account-api/client"
import { SettlementClient } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account } = await api.me()

const prefix = process.env.SETTLEMENT_QUEUE_PREFIX
const settlement = await SettlementClient.connect({
  redisUrl: setting("REDIS_URL", "redis://127.0.0.1:6379"),
  ...(prefix === undefined ? {} : { prefix })
})
const session_id = `example-${randomUUID()}`
try {
  // Reserves 5, extends the hold while the work runs, releases what is left in every outcome. The
  // session may hold plus spend 10 at most (D16): a spend reaching that aborts session.signal.
  const spent = await settlement.runSession(
    { account_id: account.id, session_id, amount_usd: "5", max_usd: "10" },
    async (session) => {
      console.log(`reserve ${session.reserved.status}: reserved ${session.reserved.wallet.reserved_usd}`)
      const result = await session.spend("1.25")
      console.log(`spend ${result.status}: spent ${result.wallet.spent_usd}`)
      return result.wallet.spent_usd
    }
  )
  const closed = await api.getSession(session_id)
  console.log(
    `session ${closed.state}: spent ${closed.spent_usd}, holds ${closed.reserved_usd} (wallet spent ${spent})`
  )
} finally {
  await settlement.close()
}
