import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { type Column, DataTable } from "../components/DataTable.js"
import { EffectiveLimits } from "../components/EffectivePanel.js"
import {
  LimitEditor,
  LimitList,
  limitOf,
  type LimitRow,
  newRow,
  raised,
  rowOf,
  RowSummary
} from "../components/LimitEditor.js"
import { isEach, ScopeName, UseOf } from "../components/LimitsList.js"
import { MemberBreakdown } from "../components/MemberBreakdown.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { RaiseDialog, type RaiseRequest } from "../components/RaiseDialog.js"
import { MyRequests, PendingRequests } from "../components/RaiseRequests.js"
import { VersionedListForm } from "../components/VersionedListForm.js"
import { type Directory, useDirectory } from "../directory.js"
import { limitWords, perPeriodWords } from "../events.js"
import { formatLocalTime } from "../format.js"
import { useLiveChanges, useLoad, useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"
import { ResetOf } from "../zone.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type SavedLimit = Limits["limits"][number]
type Effective = Awaited<ReturnType<AccountApiClient["getEffectiveLimits"]>>

/** An `each_` limit's use for the signed-in member, from their effective read; undefined when it does not apply to them. */
const mineOf = (effective: Effective | undefined, limit: SavedLimit) =>
  effective?.limits.find((one) => one.id === limit.id)

const usageColumns = (
  { directory, zone, effective, pending, onAsk }: {
    readonly directory: Directory
    readonly zone: string
    readonly effective: Effective | undefined
    readonly pending: ReadonlyArray<RaiseRequest>
    readonly onAsk: (limit: SavedLimit) => void
  }
): ReadonlyArray<Column<SavedLimit>> => [
  { header: "Scope", cell: (limit) => <ScopeName limit={limit} /> },
  { header: "Period", cell: (limit) => limit.period === "concurrent" ? "sessions at once" : perPeriodWords(limit) },
  {
    header: "Used",
    cell: (limit) => {
      if (!isEach(limit)) {
        return limit.used_usd === null ? `${limit.open_sessions ?? 0} open` : <Money value={limit.used_usd} />
      }
      const mine = mineOf(effective, limit)
      return (
        <span data-field="per-member">
          per member
          {mine?.used_usd != null && (
            <>
              ; yours <Money value={mine.used_usd} />
            </>
          )}
          {mine !== undefined && mine.used_usd === null && `; yours ${mine.open_sessions ?? 0} open`}
        </span>
      )
    },
    numeric: true
  },
  {
    header: "Limit",
    cell: (limit) =>
      limit.effective_amount_usd === null
        ? <UseOf limit={limit} />
        : (
          <>
            <Money value={limit.effective_amount_usd} />
            {isEach(limit) && " each"}
            {raised(limit) && ` until ${formatLocalTime(limit.raise?.until ?? "")}`}
          </>
        ),
    numeric: true
  },
  { header: "Resets", cell: (limit) => <ResetOf limit={limit} zone={zone} /> },
  {
    header: "More",
    cell: (limit) => {
      if (limit.period === "concurrent") return ""
      const asked = pending.find((request) => request.limit_id === limit.id && request.state === "pending")
      return asked === undefined
        ? (
          <button
            type="button"
            class="secondary"
            aria-label={`Request more for ${limitWords(directory, limit)}`}
            onClick={() => onAsk(limit)}
          >
            Request more
          </button>
        )
        : (
          <span data-field="pending-request">
            Asked for <Money value={asked.amount_usd} />: pending
          </span>
        )
    }
  }
]

/**
 * The limits (D16, D19, D22): every member sees each with its use now and when it resets in the
 * account's zone, what applies to them (the effective read for their own user: each limit's use
 * and what it leaves, the largest session they could start), "Request more" beside each spend
 * limit and their own raise requests. An administrator also decides the pending requests, sees an
 * `each_user` limit's use member by member, and edits the list (`PUT /developer/account/limits`,
 * from the version read) as components/VersionedListForm.tsx does. Read again on each change the
 * page's event stream tells (a raise decided, a session's spend).
 */
export const Limits = () => {
  const signedIn = useSignedIn()
  const directory = useDirectory()
  const me = signedIn.me.user.id
  const changes = useLiveChanges()
  const [asking, setAsking] = useState<SavedLimit | undefined>(undefined)
  const [round, setRound] = useState(0)
  const limits = useVersioned({
    load: (api) => api.getLimits(),
    toDraft: (record): ReadonlyArray<LimitRow> => record.limits.map(rowOf),
    save: (api, rows, expected_version) => api.replaceLimits({ expected_version, limits: rows.map(limitOf) })
  })
  const now = useLoad((api) => api.getLimits(), [changes, limits.saved])
  const effective = useLoad((api) => api.getEffectiveLimits({ user_id: me }), [changes, limits.saved])
  const requests = useLoad((api) => api.listRaiseRequests({ state: "all" }), [changes, round])
  const { base, draft, errors } = limits
  const shown = now.data ?? base
  const all = requests.data?.requests ?? []
  const mine = all.filter((request) => request.requested_by === me)

  return (
    <>
      <h1>Limits</h1>
      <ProblemBanner
        problem={limits.loaded.problem}
        retryInSeconds={limits.loaded.retryInSeconds}
        onRetry={limits.loaded.reload}
      />
      {shown !== undefined && (
        <section class="card" aria-labelledby="limits-use-title">
          <h2 id="limits-use-title">Use in the current period</h2>
          <p class="muted">Periods are counted in {shown.timezone}.</p>
          <DataTable
            caption={`Version ${shown.version}`}
            columns={usageColumns({
              directory,
              zone: shown.timezone,
              effective: effective.data,
              pending: mine,
              onAsk: setAsking
            })}
            rows={shown.limits}
            rowKey={(limit) => limit.id}
            empty="No limits: only the wallet's budget holds sessions back."
          />
        </section>
      )}
      <section class="card" aria-labelledby="limits-mine-title">
        <h2 id="limits-mine-title">What applies to me</h2>
        <ProblemBanner
          problem={effective.problem}
          retryInSeconds={effective.retryInSeconds}
          onRetry={effective.reload}
        />
        {effective.data !== undefined && (
          <EffectiveLimits effective={effective.data} mine caption="The limits a session of yours is judged by now" />
        )}
      </section>
      <section class="card" aria-labelledby="limits-requests-title">
        <h2 id="limits-requests-title">Your raise requests</h2>
        <ProblemBanner problem={requests.problem} retryInSeconds={requests.retryInSeconds} onRetry={requests.reload} />
        {requests.data !== undefined && <MyRequests requests={mine} limits={shown?.limits ?? []} />}
      </section>
      {signedIn.isAdmin && requests.data !== undefined && (
        <section class="card" aria-labelledby="limits-decide-title">
          <h2 id="limits-decide-title">Raise requests to decide</h2>
          <PendingRequests requests={all} limits={shown?.limits ?? []} onDecided={() => setRound((n) => n + 1)} />
        </section>
      )}
      {signedIn.isAdmin && shown !== undefined && shown.limits.some((limit) => limit.scope === "each_user") && (
        <MemberBreakdown limits={shown.limits} />
      )}
      {asking !== undefined && (
        <RaiseDialog
          limit={asking}
          onAsked={() => setRound((n) => n + 1)}
          onClose={() => setAsking(undefined)}
        />
      )}
      {signedIn.isAdmin && draft !== undefined && (
        <section class="card" aria-labelledby="limits-form-title">
          <h2 id="limits-form-title">Edit the limits</h2>
          <VersionedListForm
            versioned={limits}
            noun="limit"
            pointer="limits"
            newRow={newRow}
            summary={(row) => <RowSummary row={row} />}
            currentList={(record) => <LimitList limits={record.limits} />}
            mineList={(rows) => <LimitList limits={rows} />}
            editor={(row, at, change) => <LimitEditor row={row} at={at} change={change} errors={errors} />}
          />
        </section>
      )}
    </>
  )
}
