import type { AccountApiClient } from "@account-api/client/web"
import { formatTime, shortId } from "../format.js"
import { DataTable } from "./DataTable.js"
import { Money } from "./Money.js"

export type SessionRow = Awaited<ReturnType<AccountApiClient["listSessions"]>>["sessions"][number]

/** Runners' settlement sessions: what each holds, has spent and spent beyond its holds, and when its hold lapses. */
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
      { header: "Session", cell: (session) => <span class="id" title={session.session_id}>{session.session_id}</span> },
      {
        header: "State",
        cell: (session) => session.state === "open" ? "open" : `closed (${session.closed_reason ?? ""})`
      },
      { header: "Held", numeric: true, cell: (session) => <Money value={session.reserved_usd} /> },
      { header: "Spent", numeric: true, cell: (session) => <Money value={session.spent_usd} /> },
      { header: "Beyond holds", numeric: true, cell: (session) => <Money value={session.unfunded_usd} /> },
      {
        header: "Repository",
        cell: (session) =>
          session.repository_id === null
            ? "—"
            : <span title={session.repository_id}>{shortId(session.repository_id)}</span>
      },
      { header: "Opened", cell: (session) => formatTime(session.opened_at) },
      {
        header: "Hold lapses",
        cell: (session) => session.expires_at === null ? "—" : formatTime(session.expires_at)
      }
    ]}
  />
)
