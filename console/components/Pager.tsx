import { useState } from "preact/hooks"

/**
 * A list read newest first a page at a time by `before` (the ledger, D7; the sessions, D12): the
 * `before` of each page shown so far, the last the current page's, undefined for the newest.
 */
export const useNewestFirstPages = () => {
  const [cursors, setCursors] = useState<ReadonlyArray<string | undefined>>([undefined])
  return {
    before: cursors.at(-1),
    number: cursors.length,
    newest: () => setCursors([undefined]),
    newer: () => setCursors(cursors.slice(0, -1)),
    older: (next: string) => setCursors([...cursors, next])
  } as const
}

type Pages = ReturnType<typeof useNewestFirstPages>

/** The buttons that move through such pages: back to the newest, one newer (when asked for), one older. */
export const Pager = ({ label, pages, next, withNewer = false }: {
  readonly label: string
  readonly pages: Pages
  /** The answer's `next_before`: null on the oldest page. */
  readonly next: string | null
  readonly withNewer?: boolean
}) => (
  <nav class="actions pager" aria-label={label}>
    <button type="button" class="secondary" disabled={pages.number === 1} onClick={pages.newest}>
      Newest
    </button>
    {withNewer && (
      <button type="button" class="secondary" disabled={pages.number === 1} onClick={pages.newer}>
        Newer
      </button>
    )}
    <button type="button" disabled={next === null} onClick={() => next !== null && pages.older(next)}>
      Older
    </button>
  </nav>
)
