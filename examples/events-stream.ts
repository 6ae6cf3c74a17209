// The account's events (D17) as they happen, with @account-api/client: the live stream as an async
// iterator, from the web entry (nothing of Node, so the same loop runs in a browser). It reconnects
// by itself after a dropped connection, resuming after the last event it yielded (Last-Event-ID),
// so each event comes once, in order. Ctrl-C stops it.
//   ACCOUNT_API_EMAIL=… ACCOUNT_API_PASSWORD=… npx tsx events-stream.ts
// LAST_EVENT_ID resumes after that event; EVENTS_LIMIT stops after that many events.
import { AccountApiClient } from "@account-api/client/web"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))

const stop = new AbortController()
process.once("SIGINT", () => stop.abort())
const lastEventId = process.env.LAST_EVENT_ID
const limit = Number(process.env.EVENTS_LIMIT ?? Infinity)
let seen = 0
for await (
  const event of api.streamEvents({ signal: stop.signal, ...(lastEventId === undefined ? {} : { lastEventId }) })
) {
  console.log(`event ${event.id} ${event.type} at ${event.created_at}`)
  if (event.type === "wallet.depleted") console.log(`  the wallet is depleted: ${event.data.wallet.available_usd}`)
  seen += 1
  if (seen >= limit) break
}
console.log(`${seen} events`)
