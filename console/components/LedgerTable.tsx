import type { AccountApiClient } from "@account-api/client/web"
import { formatTime, shortId } from "../format.js"
import { DataTable } from "./DataTable.js"
import { Money } from "./Money.js"

export type LedgerEntry = Awaited<ReturnType<AccountApiClient["listLedger"]>>["entries"][number]

/** Ledger entries as they come; a note is text, whatever it holds. */
export const LedgerTable = (
  { caption, entries }: { readonly caption: string; readonly entries: ReadonlyArray<LedgerEntry> }
) => (
  <DataTable
    caption={caption}
    rows={entries}
    rowKey={(entry) => entry.id}
    empty="No entries."
    columns={[
      { header: "#", numeric: true, cell: (entry) => String(entry.sequence) },
      { header: "When", cell: (entry) => formatTime(entry.created_at) },
      { header: "Kind", cell: (entry) => entry.kind.replace(/_/g, " ") },
      { header: "Amount", numeric: true, cell: (entry) => <Money value={entry.amount_usd} /> },
      { header: "Available after", numeric: true, cell: (entry) => <Money value={entry.available_after_usd} /> },
      {
        header: "Session",
        cell: (entry) =>
          entry.session_id === null ? "—" : <span title={entry.session_id}>{shortId(entry.session_id)}</span>
      },
      { header: "Note", cell: (entry) => <span class="note">{entry.note ?? ""}</span> }
    ]}
  />
)
