import { useState } from "preact/hooks"
import { LedgerCsv } from "../components/LedgerCsv.js"
import { LedgerTable } from "../components/LedgerTable.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { useLoad } from "../session.js"

const PAGE_SIZE = 50

/** The wallet's ledger (D7), newest first, a page at a time by `next_before`; the whole of it as CSV. */
export const Ledger = () => {
  // The `before` of each page shown so far: the last is the current page's, undefined for the newest.
  const [cursors, setCursors] = useState<ReadonlyArray<string | undefined>>([undefined])
  const before = cursors.at(-1)
  const page = useLoad(
    (api) => api.listLedger({ limit: PAGE_SIZE, ...(before === undefined ? {} : { before }) }),
    [before]
  )
  const next = page.data?.next_before ?? null
  return (
    <>
      <h1>Ledger</h1>
      <ProblemBanner problem={page.problem} retryInSeconds={page.retryInSeconds} onRetry={page.reload} />
      {page.data !== undefined && (
        <LedgerTable caption={`Entries, newest first (page ${cursors.length})`} entries={page.data.entries} />
      )}
      <nav class="actions pager" aria-label="Ledger pages">
        <button type="button" class="secondary" disabled={cursors.length === 1} onClick={() => setCursors([undefined])}>
          Newest
        </button>
        <button
          type="button"
          class="secondary"
          disabled={cursors.length === 1}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </button>
        <button
          type="button"
          disabled={next === null}
          onClick={() => next !== null && setCursors([...cursors, next])}
        >
          Older
        </button>
      </nav>
      <LedgerCsv />
    </>
  )
}
