import type { AccountApiClient } from "@account-api/client/web"
import { Named, SessionId } from "../directory.js"
import { formatTime } from "../format.js"
import { DataTable } from "./DataTable.js"
import { Money } from "./Money.js"

export type SessionRow = Awaited<ReturnType<AccountApiClient["listSessions"]>>["sessions"][number]

/** A session's labels as `key=value`, or nothing. */
export const labelsText = (labels: Readonly<Record<string, string>>): string =>
  Object.entries(labels).map(([key, value]) => `${key}=${value}`).join(", ")

/**
 * What a session is now: refused when no reserve of it was ever applied (D12: known, not open,
 * holding nothing), else open or closed with its reason.
 */
export const stateOf = (session: SessionRow): string =>
  !session.funded
    ? session.state === "open" ? "refused" : `refused, closed (${session.closed_reason ?? ""})`
    : session.state === "open"
    ? "open"
    : `closed (${session.closed_reason ?? ""})`

/**
 * Runners' settlement sessions: what each holds, has spent and spent beyond its holds, whose
 * they are (repository and user by name, D23), their labels, and when the hold lapses.
 */
export const SessionsTable = (
  { caption, sessions, empty }: {
    readonly caption: string
    readonly sessions: ReadonlyArray<SessionRow>
    readonly empty: string
  }
) => (
  <DataTable
    caption={caption}
    rows={sessions}
    rowKey={(session) => session.session_id}
    empty={empty}
    columns={[
      { header: "Session", cell: (session) => <SessionId id={session.session_id} /> },
      { header: "State", cell: stateOf },
      { header: "Held", numeric: true, cell: (session) => <Money value={session.reserved_usd} /> },
      { header: "Spent", numeric: true, cell: (session) => <Money value={session.spent_usd} /> },
      { header: "Beyond holds", numeric: true, cell: (session) => <Money value={session.unfunded_usd} /> },
      { header: "Repository", cell: (session) => <Named kind="repository" id={session.repository_id} /> },
      { header: "User", cell: (session) => <Named kind="user" id={session.user_id} /> },
      { header: "Labels", cell: (session) => <span class="labels">{labelsText(session.labels)}</span> },
      { header: "Opened", cell: (session) => formatTime(session.opened_at) },
      {
        header: "Hold lapses",
        cell: (session) => session.expires_at === null || !session.funded ? "—" : formatTime(session.expires_at)
      }
    ]}
  />
)
