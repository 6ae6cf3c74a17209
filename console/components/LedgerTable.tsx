import type { AccountApiClient } from "@account-api/client/web"
import { Named, SessionId } from "../directory.js"
import { formatTime, kindWord } from "../format.js"
import { grantSharesWords, useGrantNotes } from "../grants.js"
import { DataTable } from "./DataTable.js"
import { Money } from "./Money.js"
import { labelsText } from "./OpenSessions.js"

export type LedgerEntry = Awaited<ReturnType<AccountApiClient["listLedger"]>>["entries"][number]

/**
 * Ledger entries as they come: the kind in words, the session, its repository and user by name
 * (D23), the model and labels, which grants paid, held, got back or ended it (D21), by note; a note
 * is text, whatever it holds.
 */
export const LedgerTable = (
  { caption, entries }: { readonly caption: string; readonly entries: ReadonlyArray<LedgerEntry> }
) => {
  const notes = useGrantNotes(entries)
  return (
    <DataTable
      caption={caption}
      rows={entries}
      rowKey={(entry) => entry.id}
      empty="No entries."
      columns={[
        { header: "#", numeric: true, cell: (entry) => String(entry.sequence) },
        { header: "When", cell: (entry) => formatTime(entry.created_at) },
        { header: "Kind", cell: (entry) => kindWord(entry.kind) },
        { header: "Amount", numeric: true, cell: (entry) => <Money value={entry.amount_usd} /> },
        { header: "Available after", numeric: true, cell: (entry) => <Money value={entry.available_after_usd} /> },
        { header: "Session", cell: (entry) => entry.session_id === null ? "—" : <SessionId id={entry.session_id} /> },
        {
          header: "Repository",
          cell: (entry) => entry.session_id === null ? "—" : <Named kind="repository" id={entry.repository_id} />
        },
        { header: "User", cell: (entry) => entry.session_id === null ? "—" : <Named kind="user" id={entry.user_id} /> },
        { header: "Model", cell: (entry) => entry.model ?? "—" },
        { header: "Labels", cell: (entry) => <span class="labels">{labelsText(entry.labels)}</span> },
        {
          header: "Grants",
          cell: (entry) => <span class="grant-shares">{grantSharesWords(notes, entry) || "—"}</span>
        },
        { header: "Note", cell: (entry) => <span class="note">{entry.note ?? ""}</span> }
      ]}
    />
  )
}
