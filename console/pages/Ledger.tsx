import { LedgerCsv } from "../components/LedgerCsv.js"
import { LedgerTable } from "../components/LedgerTable.js"
import { Pager, useNewestFirstPages } from "../components/Pager.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { useLoad } from "../session.js"

const PAGE_SIZE = 50

/** The wallet's ledger (D7), newest first, a page at a time by `next_before`; the whole of it as CSV. */
export const Ledger = () => {
  const pages = useNewestFirstPages()
  const before = pages.before
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
        <LedgerTable caption={`Entries, newest first (page ${pages.number})`} entries={page.data.entries} />
      )}
      <Pager label="Ledger pages" pages={pages} next={next} withNewer />
      <LedgerCsv />
    </>
  )
}
