import { formatTime, kindWord } from "../format.js"
import { grantSharesWords, useGrantNotes } from "../grants.js"
import { useLoad } from "../session.js"
import { DataTable } from "./DataTable.js"
import { Money } from "./Money.js"
import { ProblemBanner } from "./ProblemBanner.js"

/** How many of the newest entries the wallet's forms show under them. */
const RECENT_ENTRIES = 5

/**
 * The wallet's newest ledger entries, under the budget and credit forms: where an administrator
 * sees the entry their change wrote. `round` changes after each change, to read them again.
 */
export const RecentLedger = ({ round }: { readonly round: number }) => {
  const ledger = useLoad((api) => api.listLedger({ limit: RECENT_ENTRIES }), [round])
  const notes = useGrantNotes(ledger.data?.entries ?? [])
  return (
    <section class="card" aria-labelledby="recent-ledger-title">
      <h2 id="recent-ledger-title">Latest ledger entries</h2>
      <ProblemBanner problem={ledger.problem} retryInSeconds={ledger.retryInSeconds} onRetry={ledger.reload} />
      {ledger.data !== undefined && (
        <DataTable
          caption="Newest first"
          rows={ledger.data.entries}
          rowKey={(entry) => entry.id}
          empty="No entries yet."
          columns={[
            { header: "No.", cell: (entry) => entry.sequence, numeric: true },
            { header: "Kind", cell: (entry) => kindWord(entry.kind) },
            { header: "Amount", cell: (entry) => <Money value={entry.amount_usd} />, numeric: true },
            { header: "Budget after", cell: (entry) => <Money value={entry.budget_after_usd} />, numeric: true },
            {
              header: "Grants",
              cell: (entry) => <span class="grant-shares">{grantSharesWords(notes, entry) || "—"}</span>
            },
            { header: "Note", cell: (entry) => <span class="note">{entry.note ?? ""}</span> },
            { header: "When", cell: (entry) => formatTime(entry.created_at) }
          ]}
        />
      )}
    </section>
  )
}
