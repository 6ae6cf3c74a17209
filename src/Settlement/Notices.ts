import { crossingEvents } from "../Domain/BalanceAlerts.js"
import type { NewEvent, Threshold } from "../Domain/Events.js"
import type { Grant } from "../Domain/Grants.js"
import type { LedgerEntry, Wallet, WalletSession } from "../Domain/Wallet.js"
import type { Notice } from "./Plan.js"

/**
 * One wallet's part of a settlement batch as events (D17), in the order the planner booked it:
 * each movement's balance crossings (decided by the rule every writer of a wallet uses, from the
 * wallet before and after that movement, against the thresholds as saved), then a session
 * closed, a cap reached, a limit reached or approached (D19), a grant expired or expiring (D21)
 * where the planner noticed one. Pure: the batch writes
 * what this returns in its own transaction.
 */
export const eventsOfPlan = (input: {
  /** The wallet before the batch's first movement. */
  readonly before: Wallet
  /** The wallet right after each of the plan's movements, in the plan's order. */
  readonly walletsAfter: ReadonlyArray<Wallet>
  /** Each movement's entry, in the plan's order. */
  readonly entries: ReadonlyArray<LedgerEntry>
  /** A grant as the batch leaves it (D21). */
  readonly grant: (grantId: string) => Grant | undefined
  readonly notices: ReadonlyArray<Notice>
  readonly thresholds: ReadonlyArray<Threshold>
  /** A session of the batch as written, in D12's view. */
  readonly session: (sessionId: string) => WalletSession | undefined
}): Array<NewEvent> => {
  const events: Array<NewEvent> = []
  for (const notice of input.notices) {
    switch (notice._tag) {
      case "Moved": {
        const after = input.walletsAfter[notice.index]
        if (after === undefined) break
        const before = notice.index === 0 ? input.before : input.walletsAfter[notice.index - 1] ?? input.before
        events.push(...crossingEvents(input.thresholds, before, after))
        break
      }
      case "SessionClosed": {
        const session = input.session(notice.session_id)
        if (session !== undefined) events.push({ type: "session.closed", data: { session } })
        break
      }
      case "CapReached": {
        const session = input.session(notice.session_id)
        if (session !== undefined) {
          events.push({ type: "session.cap_reached", data: { session, max_usd: notice.cap } })
        }
        break
      }
      case "GrantExpired": {
        const grant = input.grant(notice.grant_id)
        const entry = input.entries[notice.index]
        if (grant !== undefined && entry !== undefined) events.push({ type: "grant.expired", data: { grant, entry } })
        break
      }
      case "GrantExpiring": {
        const grant = input.grant(notice.grant_id)
        if (grant !== undefined) {
          events.push({ type: "grant.expiring", data: { grant, free_usd: notice.free, days_left: notice.days_left } })
        }
        break
      }
      case "LimitReached":
      case "LimitApproaching": {
        const { amount_usd, id, period, scope, scope_id, used_usd } = notice.limit
        // Rolling limits have no period to announce once in (D22); concurrency limits no amounts.
        if (id === null || period === "concurrent" || period === "rolling") break
        const appliesTo = notice.limit.applies_to
        const named = {
          id,
          scope,
          scope_id,
          ...(appliesTo === null ? {} : { applies_to: appliesTo }),
          period,
          amount_usd,
          used_usd
        }
        if (notice._tag === "LimitReached") events.push({ type: "limit.reached", data: { limit: named } })
        else {
          events.push({
            type: "limit.approaching",
            data: {
              limit: named,
              percent: notice.percent,
              used_usd,
              ...(notice.session_id === null ? {} : { session_id: notice.session_id })
            }
          })
        }
        break
      }
    }
  }
  return events
}
