import { DateTime, Effect, Either } from "effect"
import type { Account } from "../Domain/Account.js"
import { ValidationFailed } from "../Domain/Errors.js"
import * as Money from "../Domain/Money.js"
import {
  isoDay,
  MAX_SPEND_GROUPS,
  SpendGroup,
  type SpendGroupBy,
  SpendReport,
  SpendTotal,
  spendWindow
} from "../Domain/Spend.js"
import { SpendReportRepo } from "./ReportRepo.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

const noSpend = new SpendTotal({ spent_usd: Money.zero, unfunded_usd: Money.zero, sessions: 0 }, trusted)

/**
 * The spend report (D16): what the account's sessions spent, grouped by repository, user, day or
 * month, read from the running totals the settlement transaction keeps, never from the ledger.
 */
export class SpendReports extends Effect.Service<SpendReports>()("SpendControls/Reports", {
  effect: Effect.gen(function*() {
    const repo = yield* SpendReportRepo

    /** Runs for every report read, as a ledger page does, so it is not traced. */
    const report = Effect.fnUntraced(function*(
      account: Account,
      query: {
        readonly group_by: SpendGroupBy
        readonly from: DateTime.Utc | undefined
        readonly to: DateTime.Utc | undefined
      }
    ) {
      const window = spendWindow(yield* DateTime.now, query)
      if (Either.isLeft(window)) return yield* ValidationFailed.at("#/query/to", window.left)
      const { from, to } = window.right
      const rows = yield* repo.report({
        account_kind: account.kind,
        account_id: account.id,
        from: isoDay(from),
        to: isoDay(to),
        group_by: query.group_by,
        limit: MAX_SPEND_GROUPS
      })
      const total = rows.find((row) => row.is_total)
      return new SpendReport({
        from,
        to,
        group_by: query.group_by,
        groups: rows.filter((row) => !row.is_total).map(({ is_total: _, ...group }) => new SpendGroup(group, trusted)),
        total: total === undefined ? noSpend : new SpendTotal({
          spent_usd: total.spent_usd,
          unfunded_usd: total.unfunded_usd,
          sessions: total.sessions
        }, trusted)
      }, trusted)
    })

    return { report } as const
  }),
  dependencies: [SpendReportRepo.Default]
}) {}
