import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { type DirectoryMember, useDirectory } from "../directory.js"
import { perPeriodWords } from "../events.js"
import { useLoad } from "../session.js"
import { type Column, DataTable } from "./DataTable.js"
import { Money } from "./Money.js"
import { ProblemBanner } from "./ProblemBanner.js"

type Limit = Awaited<ReturnType<AccountApiClient["getLimits"]>>["limits"][number]
type Effective = Awaited<ReturnType<AccountApiClient["getEffectiveLimits"]>>

/** The most members read: one effective read each, so the page stays bounded. */
const MOST_MEMBERS = 50

interface MemberUse {
  readonly member: DirectoryMember
  readonly effective: Effective
}

/**
 * An `each_user` limit member by member, for administrators (D22): the effective read of each
 * of the directory's first 50 members, made when asked, each limit's use and what it leaves for
 * them. A member with a `user` limit of their own for that period shows it replaced.
 */
export const MemberBreakdown = ({ limits }: { readonly limits: ReadonlyArray<Limit> }) => {
  const directory = useDirectory()
  const [asked, setAsked] = useState(0)
  const each = limits.filter((limit) => limit.scope === "each_user")
  const members = directory.members.slice(0, MOST_MEMBERS)
  const uses = useLoad(async (api): Promise<ReadonlyArray<MemberUse> | undefined> => {
    if (asked === 0) return undefined
    const read: Array<MemberUse> = []
    // One at a time: at most 50 small reads, never 50 at once.
    for (const member of members) read.push({ member, effective: await api.getEffectiveLimits({ user_id: member.id }) })
    return read
  }, [asked])
  const columns: ReadonlyArray<Column<MemberUse>> = [
    { header: "Member", cell: (use) => use.member.name },
    ...each.map((limit, index): Column<MemberUse> => ({
      header: `Each user, ${perPeriodWords(limit)}${each.length > 1 ? ` (${index + 1})` : ""}`,
      cell: (use) => {
        const applied = use.effective.limits.find((one) => one.id === limit.id)
        if (applied === undefined) return "replaced by their own limit"
        return applied.used_usd === null ? "" : (
          <>
            <Money value={applied.used_usd} /> used, <Money value={applied.remaining_usd ?? "0"} /> left
          </>
        )
      },
      numeric: true
    }))
  ]
  return (
    <section class="card" aria-labelledby="limits-members-title">
      <h2 id="limits-members-title">Each user's use</h2>
      <p class="muted">
        Read when asked, one member at a time: the first {MOST_MEMBERS} members at most (the account has{" "}
        {directory.members.length}).
      </p>
      <div class="actions">
        <button
          type="button"
          class="secondary"
          disabled={uses.loading && asked > 0}
          onClick={() => setAsked((n) => n + 1)}
        >
          {asked === 0 ? "Show each member's use" : "Read it again"}
        </button>
      </div>
      <ProblemBanner problem={uses.problem} retryInSeconds={uses.retryInSeconds} onRetry={uses.reload} />
      {uses.data !== undefined && (
        <DataTable
          caption="Use of each user's limits, member by member"
          columns={columns}
          rows={uses.data}
          rowKey={(use) => use.member.id}
          empty="The directory has no members."
        />
      )}
    </section>
  )
}
