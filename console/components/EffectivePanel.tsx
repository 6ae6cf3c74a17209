import type { AccountApiClient } from "@account-api/client/web"
import type { ComponentChildren } from "preact"
import { useDirectory } from "../directory.js"
import { memberWords, perPeriodWords, scopeWords } from "../events.js"
import { ResetOf } from "../zone.js"
import { type Column, DataTable } from "./DataTable.js"
import { ScopeName } from "./LimitsList.js"
import { Money } from "./Money.js"

export type Effective = Awaited<ReturnType<AccountApiClient["getEffectiveLimits"]>>
type EffectiveLimit = Effective["limits"][number]

/** How a limit applies here: "as the account's", "as each user's: you". */
const AppliesAs = ({ limit, mine }: { readonly limit: EffectiveLimit; readonly mine: boolean }) => {
  const directory = useDirectory()
  const member = memberWords(directory, limit)
  return (
    <>
      {`as ${scopeWords(directory, { scope: limit.applies_as, scope_id: limit.scope_id })}`}
      {member === undefined ? "" : `: ${mine && limit.applies_as === "each_user" ? "you" : member}`}
    </>
  )
}

const columns = (zone: string, mine: boolean): ReadonlyArray<Column<EffectiveLimit>> => [
  {
    header: "Limit",
    cell: (limit) => (
      <>
        <ScopeName limit={limit} />
        {limit.period === "concurrent" ? "" : `, ${perPeriodWords(limit)}`}
      </>
    )
  },
  { header: "Applies", cell: (limit) => <AppliesAs limit={limit} mine={mine} /> },
  {
    header: "Used",
    cell: (limit) =>
      limit.used_usd === null
        ? `${limit.open_sessions ?? 0} of ${limit.max_open_sessions ?? 0} open`
        : (
          <>
            <Money value={limit.used_usd} /> of <Money value={limit.effective_amount_usd ?? "0"} />
          </>
        ),
    numeric: true
  },
  {
    header: "Remaining",
    cell: (limit) => limit.remaining_usd === null ? "" : <Money value={limit.remaining_usd} />,
    numeric: true
  },
  { header: "Resets", cell: (limit) => <ResetOf limit={limit} zone={zone} /> }
]

/**
 * What a new session would be judged by now (D22's effective read): each limit that applies,
 * how it applies (an `each_` limit as the member's own), what it has used and leaves, when it
 * resets in the account's zone; the largest session that could start now, and the wallet's funds.
 * `mine`: the read is the signed-in member's own, so it speaks to them.
 */
export const EffectiveLimits = (
  { effective, mine, caption }: {
    readonly effective: Effective
    readonly mine: boolean
    readonly caption: string
  }
) => {
  const you = (ifMine: string, other: string) => mine ? ifMine : other
  const reservable: ComponentChildren = effective.max_reservable_usd === null
    ? `No limit and no budget bounds a new session ${you("of yours", "of theirs")} now.`
    : (
      <>
        {you("You", "They")} can start a session of up to <Money value={effective.max_reservable_usd} /> now.
      </>
    )
  return (
    <>
      <p class="reservable" data-field="max_reservable">{reservable}</p>
      <p data-field="funds">
        {effective.funds_usd === null
          ? "The wallet's budget is not enforced: only the limits hold sessions back."
          : (
            <>
              The wallet has <Money value={effective.funds_usd} /> available for sessions.
            </>
          )}
      </p>
      <DataTable
        caption={caption}
        columns={columns(effective.timezone, mine)}
        rows={effective.limits}
        rowKey={(limit) => `${limit.id}-${limit.applies_to ?? ""}`}
        empty={you("No limit applies to your sessions.", "No limit applies to their sessions.")}
      />
    </>
  )
}
