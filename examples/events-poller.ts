// The account's events (D17), pulled page by page with @account-api/client: run it as often as you
// like (a cron job); it resumes after the last event it handled, kept in a cursor file.
//   ACCOUNT_API_EMAIL=… ACCOUNT_API_PASSWORD=… npx tsx events-poller.ts
// It changes nothing in the account; it leaves its cursor file (EVENTS_CURSOR_FILE,
// events-cursor.txt): delete it to start again from the oldest event kept.
import { AccountApiClient } from "@account-api/client"
import { existsSync, readFileSync, writeFileSync } from "node:fs"

const setting = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback
  if (value === undefined) throw new Error(`set ${name}`)
  return value
}

const api = new AccountApiClient({ baseUrl: setting("ACCOUNT_API_URL", "http://localhost:8080") })
await api.login(setting("ACCOUNT_API_EMAIL"), setting("ACCOUNT_API_PASSWORD"))

const cursorFile = setting("EVENTS_CURSOR_FILE", "events-cursor.txt")
const cursor = existsSync(cursorFile) ? readFileSync(cursorFile, "utf8").trim() : ""
let handled = 0
// Oldest first, 100 a page, following next_after; an `after` older than the 30 days kept is 404 event_not_found.
for await (const page of api.eventPages({ limit: 100, ...(cursor === "" ? {} : { after: cursor }) })) {
  for (const event of page.events) {
    // `type` narrows `data` to that type's schema.
    switch (event.type) {
      case "wallet.balance_low":
        console.log(
          `event ${event.id} ${event.type}: available ${event.data.wallet.available_usd} < ${event.data.threshold_usd}`
        )
        break
      case "wallet.budget_set":
      case "wallet.credit_added":
        console.log(`event ${event.id} ${event.type}: budget ${event.data.wallet.budget_usd}`)
        break
      default:
        console.log(`event ${event.id} ${event.type}`)
    }
    handled += 1
  }
  // Saved once the page is handled: a run that stops midway handles that page again, never skips it.
  const last = page.events.at(-1)
  if (last !== undefined) writeFileSync(cursorFile, last.id)
}
console.log(`${handled} new events`)
