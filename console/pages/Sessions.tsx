import { useState } from "preact/hooks"
import { LedgerTable } from "../components/LedgerTable.js"
import { Money } from "../components/Money.js"
import { SessionsTable } from "../components/OpenSessions.js"
import { Pager, useNewestFirstPages } from "../components/Pager.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { middleId } from "../format.js"
import { useLiveChanges, useLoad } from "../session.js"

const PAGE_SIZE = 25

/**
 * Runners' settlement sessions (D12): the open ones (read again on each change the live stream
 * tells, D17: no polling), the
 * recent ones a page at a time, the cap a session limit puts on each, and any one session's
 * ledger entries (its holds, spends and release).
 */
export const Sessions = () => {
  const changes = useLiveChanges()
  const open = useLoad((api) => api.listSessions({ state: "open" }), [changes])
  const pages = useNewestFirstPages()
  const before = pages.before
  const recent = useLoad(
    (api) => api.listSessions({ state: "all", limit: PAGE_SIZE, ...(before === undefined ? {} : { before }) }),
    [before]
  )
  const limits = useLoad((api) => api.getLimits(), [])
  const caps = (limits.data?.limits ?? []).flatMap((limit) =>
    limit.scope === "session" && limit.effective_amount_usd !== null && limit.used_usd !== null
      ? [{ id: limit.id, amount: limit.effective_amount_usd, used: limit.used_usd }]
      : []
  )
  const [chosen, setChosen] = useState("")
  const detail = useLoad((api) => chosen === "" ? Promise.resolve(undefined) : api.getSession(chosen), [chosen])
  const next = recent.data?.next_before ?? null

  return (
    <>
      <h1>Sessions</h1>
      <section class="card" aria-labelledby="caps-title">
        <h2 id="caps-title">Cap on each session</h2>
        <ProblemBanner problem={limits.problem} retryInSeconds={limits.retryInSeconds} onRetry={limits.reload} />
        {caps.length === 0
          ? (
            <p class="muted">
              No session limit: a session may hold and spend up to what the wallet and the other limits allow.
            </p>
          )
          : (
            <ul>
              {caps.map((cap) => (
                <li key={cap.id}>
                  Each session may hold plus spend at most <Money value={cap.amount} />; the most any open one has now:
                  {" "}
                  <Money value={cap.used} />
                </li>
              ))}
            </ul>
          )}
      </section>
      <section class="card" aria-labelledby="open-title">
        <h2 id="open-title">Open</h2>
        <ProblemBanner problem={open.problem} retryInSeconds={open.retryInSeconds} onRetry={open.reload} />
        {open.data !== undefined && (
          <SessionsTable caption="Open sessions" sessions={open.data.sessions} empty="No session is open." />
        )}
      </section>
      <section class="card" aria-labelledby="recent-title">
        <h2 id="recent-title">Recent</h2>
        <ProblemBanner problem={recent.problem} retryInSeconds={recent.retryInSeconds} onRetry={recent.reload} />
        {recent.data !== undefined && (
          <SessionsTable caption="Sessions, newest first" sessions={recent.data.sessions} empty="No sessions yet." />
        )}
        <Pager label="Session pages" pages={pages} next={next} />
      </section>
      <section class="card" aria-labelledby="detail-title">
        <h2 id="detail-title">One session's entries</h2>
        <form
          class="controls"
          onSubmit={(event) => {
            event.preventDefault()
            const field = event.currentTarget.elements.namedItem("session_id")
            if (field instanceof HTMLSelectElement) setChosen(field.value)
          }}
        >
          <div class="field">
            <label for="session_id">Session</label>
            <select id="session_id" name="session_id">
              {(recent.data?.sessions ?? []).map((session) => (
                <option key={session.session_id} value={session.session_id}>{middleId(session.session_id)}</option>
              ))}
            </select>
          </div>
          <button type="submit">Show its entries</button>
        </form>
        <ProblemBanner problem={detail.problem} retryInSeconds={detail.retryInSeconds} onRetry={detail.reload} />
        {detail.data !== undefined && (
          <LedgerTable caption={`Entries of ${detail.data.session_id}, oldest first`} entries={detail.data.entries} />
        )}
      </section>
    </>
  )
}
