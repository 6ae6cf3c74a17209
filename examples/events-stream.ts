// The account's events (D17) as they happen, with @account-api/client: the live stream as an async
// iterator, from the web entry (nothing of Node, so the same loop runs in a browser). It reconnects
// by itself after a dropped connection, resuming after the last event it yielded (Last-Event-ID),
// so each event comes once, in order. It stops after SECONDS (an argument, or EVENTS_SECONDS; 30 by
// default, 0 for never: then Ctrl-C stops it), or after EVENTS_LIMIT events.
//   ACCOUNT_API_EMAIL=… ACCOUNT_API_PASSWORD=… npx tsx events-stream.ts [SECONDS]
// LAST_EVENT_ID resumes after that event. It changes nothing in the account.
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
const seconds = Number(process.argv[2] ?? setting("EVENTS_SECONDS", "30"))
if (!(seconds >= 0)) throw new Error("SECONDS must be a number of seconds (0: until Ctrl-C)")
// Unref'd, so a stream that ended first leaves nothing waiting.
if (seconds > 0) setTimeout(() => stop.abort(), seconds * 1000).unref()
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
