import type { AccountApiClient, AccountEvent } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { EventsList } from "../components/EventsList.js"
import { LimitsList } from "../components/LimitsList.js"
import { SessionsTable } from "../components/OpenSessions.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { SpendChart } from "../components/SpendChart.js"
import { WalletCard } from "../components/WalletCard.js"
import { useEventStream, useLoad } from "../session.js"

const RECENT_EVENTS = 10

/**
 * The wallet, the open sessions and the limits, read together and shown together, so that they
 * agree at every moment: after a reserve the held amount, the sessions and a concurrency
 * limit's count move in the same render.
 */
const readLive = async (api: AccountApiClient) => {
  const [wallet, sessions, limits] = await Promise.all([
    api.getWallet(),
    api.listSessions({ state: "open" }),
    api.getLimits()
  ])
  return { wallet, sessions, limits }
}

/**
 * What every member sees first: the wallet, the sessions running now, this month's spend, the
 * limits, recent events. Live without polling (D17, D20): the event stream brings the events and
 * the wallet's change notices (a reserve, a spend, a release writes no event), and each is one
 * read of the wallet, the open sessions and the limits together; an idle overview reads nothing.
 */
export const Overview = () => {
  const [changes, setChanges] = useState(0)
  const [streamed, setStreamed] = useState<ReadonlyArray<AccountEvent>>([])

  const live = useLoad(readLive, [changes])
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
    recent.data !== undefined,
    () => setChanges((n) => n + 1)
  )
  const events = [...streamed, ...(recent.data ?? [])].slice(0, RECENT_EVENTS)

  return (
    <>
      <h1>Overview</h1>
      <ProblemBanner problem={live.problem} retryInSeconds={live.retryInSeconds} onRetry={live.reload} />
      {live.data !== undefined && <WalletCard wallet={live.data.wallet} />}
      <section class="card" aria-labelledby="open-sessions-title">
        <h2 id="open-sessions-title">Sessions running now</h2>
        <p class="live">Updates as sessions open, spend and close.</p>
        {live.data !== undefined && (
          <SessionsTable caption="Open sessions" sessions={live.data.sessions.sessions} empty="No session is open." />
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
          {live.data !== undefined && <LimitsList limits={live.data.limits} />}
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
