import type { AccountEvent } from "@account-api/client/web"
import { formatTime } from "../format.js"

/** An event's data as `name: value` pairs, nested names joined by dots; shown as text, whatever it holds. */
const summaryOf = (data: unknown, prefix = ""): ReadonlyArray<string> => {
  if (data === null || typeof data !== "object") return [`${prefix}: ${String(data)}`]
  return Object.entries(data).flatMap(([name, value]) => summaryOf(value, prefix === "" ? name : `${prefix}.${name}`))
}

/** Events, newest first: the type, when, and what they carry. */
export const EventsList = ({ events }: { readonly events: ReadonlyArray<AccountEvent> }) =>
  events.length === 0
    ? <p class="muted">No events yet.</p>
    : (
      <ol class="events">
        {events.map((event) => (
          <li key={event.id}>
            <strong>{event.type}</strong> <span class="muted">{formatTime(event.created_at)}</span>
            <p class="event-data">{summaryOf(event.data).slice(0, 6).join(" · ")}</p>
          </li>
        ))}
      </ol>
    )
