// A concurrency limit stopping a fan-out (D19), with @account-api/client: an administrator lets the
// sessions of one label be open at most MAX_OPEN_SESSIONS at a time, then a runner starts SESSIONS
// of them at once. The limit's worth open and run; each of the others is refused `limit_reached`
// before its work runs (a SessionRefused with the limit, its max_open_sessions and the open_sessions
// it found, and max_reservable_usd "0.000000": no reserve could have opened a session then).
//   ACCOUNT_API_EMAIL=<an administrator> ACCOUNT_API_PASSWORD=… node fan-out-limit.mjs
// MAX_OPEN_SESSIONS (3) and SESSIONS (5) size it. The account's own limits are kept and put back.
// It leaves the sessions that ran on the books (closed, 0.25 USD spent each, on the ledger, whose
// entries stay); a credit of what they spent puts the wallet's available back if you want it.
import { AccountApiClient } from "@account-api/client"
import { SessionRefused, SettlementClient } from "@account-api/client/settlement"
import { randomUUID } from "node:crypto"

const setting = (name, fallback) => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}
const maxOpen = Number(setting("MAX_OPEN_SESSIONS", "3"))
const sessions = Number(setting("SESSIONS", "5"))

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))
const { account } = await api.me()

// A label of this run's own, so the limit counts the sessions started here and no others.
const run = randomUUID().slice(0, 8)
const labels = { fleet: `fan-out-${run}` }
const scope_id = `fleet=${labels.fleet}`

// The limit that refused a session, in words: whichever of the account's limits it was, this run's
// or another (an account-wide limit has no scope_id).
const limitName = (limit) => {
  const what = limit.period === "concurrent" ? "limit" : `${limit.period} limit of ${limit.amount_usd} USD`
  return limit.scope_id === null ? `the ${limit.scope}'s ${what}` : `the ${limit.scope} ${what} ${limit.scope_id}`
}

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
let kept
let set
try {
  // PUT replaces the whole list, under its version: the account's limits stay, this one joins them.
  const before = await api.getLimits()
  kept = before.limits.map(asItem)
  set = await api.replaceLimits({
    expected_version: before.version,
    limits: [...kept, { scope: "label", scope_id, period: "concurrent", max_open_sessions: maxOpen }]
  })
  console.log(`limit: label ${scope_id}, at most ${maxOpen} sessions open at once`)

  // Each session's work holds its session open until every reserve has been answered, so the
  // refused ones meet the open ones (a session that closes frees its place for the next).
  let answered = 0
  let everyoneAnswered
  const allAnswered = new Promise((resolve) => (everyoneAnswered = resolve))
  const start = (n) => {
    let counted = false
    const answer = () => {
      if (counted) return
      counted = true
      answered += 1
      if (answered === sessions) everyoneAnswered()
    }
    return settlement.runSession(
      { account_id: account.id, session_id: `${labels.fleet}-${n}`, amount_usd: "1", labels },
      async (session) => {
        answer()
        await allAnswered
        const spent = await session.spend("0.25", { model: "example-model" })
        return `ran: spend ${spent.status}`
      }
    ).catch((error) => {
      answer()
      if (error instanceof SessionRefused) return error
      throw error
    })
  }
  const outcomes = await Promise.all(Array.from({ length: sessions }, (_, n) => start(n)))

  for (const [n, outcome] of outcomes.entries()) {
    if (!(outcome instanceof SessionRefused)) {
      console.log(`session ${n} ${outcome}`)
    } else if (outcome.limit?.period === "concurrent") {
      const { max_open_sessions, open_sessions } = outcome.limit
      console.log(
        `session ${n} refused ${outcome.status} by ${limitName(outcome.limit)}: ` +
          `${open_sessions} of ${max_open_sessions} open, max_reservable_usd ${outcome.max_reservable_usd}`
      )
    } else if (outcome.limit != null) {
      console.log(`session ${n} refused ${outcome.status} by ${limitName(outcome.limit)}: ${outcome.message}`)
    } else {
      console.log(`session ${n} refused ${outcome.status}: ${outcome.message}`)
    }
  }
  const refused = outcomes.filter((outcome) => outcome instanceof SessionRefused).length
  console.log(`opened ${sessions - refused} of ${sessions} sessions; ${refused} refused`)
} finally {
  await settlement.close()
  // The account's limits as they were (a 409 if another administrator changed them meanwhile).
  if (set !== undefined) await api.replaceLimits({ expected_version: set.version, limits: kept })
}
