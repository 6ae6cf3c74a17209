// A trial credit that expires while a session runs (D21), with @account-api/client: an
// administrator grants 5 USD of trial credit that expires GRANT_SECONDS from now (180: a few
// minutes), drawn before every grant of the default priority (priority 10, promotional). A session
// reserves 4 and spends 1; it is still running when the grant expires, and then spends 1 more and
// releases. At expires_at the grant's free part (what no hold had earmarked) leaves the budget; the
// session's spends still draw what its hold earmarked on the grant (work funded before the expiry is
// honoured), and what its release gives back to the grant expires then.
//   ACCOUNT_API_EMAIL=<an administrator> ACCOUNT_API_PASSWORD=… npx tsx trial-grant.ts
// It leaves the grant expired and its session closed on the books (2 USD spent, 3 expired; the
// ledger's entries stay): the wallet's available is what it was before.
import { AccountApiClient, type AccountEventOf } from "@account-api/client"
import { SettlementClient, type SettlementResult } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}
const seconds = Number(setting("GRANT_SECONDS", "180"))

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account } = await api.me()

// An ISO 8601 time with its zone; the grant never expires without one.
const expires_at = new Date(Date.now() + seconds * 1000).toISOString()
const { grant } = await api.addCredit({
  amount_usd: "5",
  expires_at,
  priority: 10,
  category: "promotional",
  note: "trial"
})
console.log(
  `grant ${grant.id}: ${grant.amount_usd} ${grant.category}, priority ${grant.priority}, expires ${grant.expires_at}`
)

// What a ledger entry moved of the trial grant: earmarked, drawn, returned or ended.
type Entry = { readonly kind: string; readonly grants: ReadonlyArray<{ grant_id: string; amount_usd: string }> }
const ofTrial = (entry: Entry | undefined) =>
  entry?.grants.find((share) => share.grant_id === grant.id)?.amount_usd ?? "0.000000"
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
// The trial grant once it has ended. The service expires a grant within a minute of its
// expires_at, whether or not anything runs; this asks every second.
const endedTrial = async () => {
  for (;;) {
    const ended = (await api.listGrants({ state: "ended" })).grants.find((ended) => ended.id === grant.id)
    if (ended !== undefined) return ended
    if (Date.now() > Date.parse(expires_at) + 90_000) throw new Error(`the grant did not expire by ${expires_at}`)
    await pause(1_000)
  }
}

const prefix = process.env.SETTLEMENT_QUEUE_PREFIX
const settlement = await SettlementClient.connect({
  redisUrl: setting("REDIS_URL", "redis://127.0.0.1:6379"),
  ...(prefix === undefined ? {} : { prefix })
})
const session_id = `trial-${randomUUID()}`
// The session's entry a job wrote, of the kind asked for.
const entryOf = async (result: SettlementResult, kind: string) =>
  (await api.getSession(session_id)).entries.find((entry) => entry.kind === kind && result.entry_ids.includes(entry.id))
try {
  await settlement.runSession({ account_id: account.id, session_id, amount_usd: "4" }, async (session) => {
    const held = await entryOf(session.reserved, "reserve")
    console.log(
      `reserve ${session.reserved.status}: holds ${held?.amount_usd}, ${ofTrial(held)} of it on the trial grant`
    )
    const before = await session.spend("1")
    console.log(
      `spend ${before.status} before the expiry: ${ofTrial(await entryOf(before, "spend"))} from the trial grant`
    )

    const expired = await endedTrial()
    const wallet = await api.getWallet()
    console.log(
      `grant ${expired.state}: ${expired.ended_usd} left the budget (now ${wallet.budget_usd}); ` +
        `the session still holds ${expired.held_usd} of it`
    )

    const after = await session.spend("1")
    console.log(
      `spend ${after.status} after the expiry: ${ofTrial(await entryOf(after, "spend"))} from the trial grant`
    )
  })
  const closed = await api.getSession(session_id)
  const returned = closed.entries.find((entry) => entry.kind === "reserve_release")
  console.log(
    `session ${closed.state}: spent ${closed.spent_usd}; the release gave ${ofTrial(returned)} back, which expired`
  )

  // The grant at the end, and every entry that moved it, oldest first.
  const ended = await endedTrial()
  console.log(
    `trial grant ${ended.state}: drawn ${ended.drawn_usd}, held ${ended.held_usd}, free ${ended.free_usd}, ` +
      `ended ${ended.ended_usd} of ${ended.amount_usd}`
  )
  const moved: Array<Entry & { readonly amount_usd: string }> = []
  for await (const page of api.ledgerPages()) {
    moved.push(...page.entries.filter((entry) => ofTrial(entry) !== "0.000000"))
    if (page.entries.some((entry) => entry.id === grant.entry_id)) break
  }
  for (const entry of moved.reverse()) {
    console.log(`entry ${entry.kind} ${entry.amount_usd}: ${ofTrial(entry)} of the trial grant`)
  }
  const { events } = await api.listEvents({ order: "newest", limit: 10, type: "grant.expired" })
  const event = events.find((event): event is AccountEventOf<"grant.expired"> =>
    event.type === "grant.expired" && event.data.grant.id === grant.id
  )
  console.log(`event grant.expired: ${event?.data.entry.kind} ${event?.data.entry.amount_usd}`)
} finally {
  await settlement.close()
}
