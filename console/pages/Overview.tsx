import type { AccountEvent } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { EventsList } from "../components/EventsList.js"
import { LimitsList } from "../components/LimitsList.js"
import { SessionsTable } from "../components/OpenSessions.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { SpendChart } from "../components/SpendChart.js"
import { WalletCard } from "../components/WalletCard.js"
import { useEventStream, useLoad, usePoll } from "../session.js"

/**
 * No event is written when a session opens or holds more (D17's catalog has `session.closed`
 * and `session.cap_reached` only), so the open sessions are read again this often while the tab
 * is shown, and at once on any event of the stream.
 */
const OPEN_SESSIONS_POLL_MS = 250
const RECENT_EVENTS = 10

/** What every member sees first: the wallet, the sessions running now, this month's spend, the limits, recent events. */
export const Overview = () => {
  const poll = usePoll(OPEN_SESSIONS_POLL_MS)
  const [changes, setChanges] = useState(0)
  const [streamed, setStreamed] = useState<ReadonlyArray<AccountEvent>>([])

  const wallet = useLoad((api) => api.getWallet(), [changes])
  const sessions = useLoad((api) => api.listSessions({ state: "open" }), [poll, changes])
  const limits = useLoad((api) => api.getLimits(), [changes])
  const spend = useLoad((api) => api.getSpendByDay({ split_by: "repository" }), [])
  const recent = useLoad(
    async (api) => (await api.listEvents({ order: "newest", limit: RECENT_EVENTS })).events,
    []
  )

  // The stream resumes after the newest event read, so nothing committed meanwhile is missed.
  useEventStream(
    (event) => {
      setStreamed((before) => [event, ...before].slice(0, RECENT_EVENTS))
      setChanges((n) => n + 1)
    },
    recent.data?.[0]?.id,
    recent.data !== undefined
  )
  const events = [...streamed, ...(recent.data ?? [])].slice(0, RECENT_EVENTS)

  return (
    <>
      <h1>Overview</h1>
      <ProblemBanner problem={wallet.problem} retryInSeconds={wallet.retryInSeconds} onRetry={wallet.reload} />
      {wallet.data !== undefined && <WalletCard wallet={wallet.data} />}
      <section class="card" aria-labelledby="open-sessions-title">
        <h2 id="open-sessions-title">Sessions running now</h2>
        <p class="live">Updates as sessions open, spend and close.</p>
        <ProblemBanner problem={sessions.problem} retryInSeconds={sessions.retryInSeconds} onRetry={sessions.reload} />
        {sessions.data !== undefined && (
          <SessionsTable caption="Open sessions" sessions={sessions.data.sessions} empty="No session is open." />
        )}
      </section>
      <div class="grid">
        <section class="card" aria-labelledby="month-spend-title">
          <h2 id="month-spend-title">This month's spend</h2>
          <ProblemBanner problem={spend.problem} retryInSeconds={spend.retryInSeconds} onRetry={spend.reload} />
          {spend.data !== undefined && <SpendChart title="Spent per day, by repository (UTC)" report={spend.data} />}
          <p>
            <a href="#/spend">Spend by repository or user, any window</a>
          </p>
        </section>
        <section class="card" aria-labelledby="limits-title">
          <h2 id="limits-title">Spend limits</h2>
          <ProblemBanner problem={limits.problem} retryInSeconds={limits.retryInSeconds} onRetry={limits.reload} />
          {limits.data !== undefined && <LimitsList limits={limits.data} />}
        </section>
      </div>
      <section class="card" aria-labelledby="events-title">
        <h2 id="events-title">Recent events</h2>
        <ProblemBanner problem={recent.problem} retryInSeconds={recent.retryInSeconds} onRetry={recent.reload} />
        <EventsList events={events} />
      </section>
    </>
  )
}
