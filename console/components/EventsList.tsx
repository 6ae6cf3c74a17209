import type { AccountEvent } from "@account-api/client/web"
import { useDirectory } from "../directory.js"
import { eventLines, eventSentence, runWords } from "../events.js"
import { formatTime } from "../format.js"

/**
 * Events, newest first, each as a sentence (console/events.ts) with when; a balance crossing one
 * threshold back and forth is one line with a count. The type stays beside it, for a person
 * matching it to a webhook's.
 */
export const EventsList = ({ events }: { readonly events: ReadonlyArray<AccountEvent> }) => {
  const directory = useDirectory()
  const lines = eventLines(events)
  return lines.length === 0
    ? <p class="muted">No events yet.</p>
    : (
      <ol class="events">
        {lines.map((line) => {
          const older = events.slice(events.indexOf(line.event) + 1).find((other) => other.type === line.event.type)
          return (
            <li key={line.key} data-type={line.event.type}>
              <p class="event-sentence">{runWords(line)}{eventSentence(directory, line.event, older)}</p>
              <p class="event-data">
                <span class="muted">{formatTime(line.event.created_at)} · {line.event.type}</span>
              </p>
            </li>
          )
        })}
      </ol>
    )
}
