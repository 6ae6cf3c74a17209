import { DateTime, Effect, Either } from "effect"
import type { Account } from "../Domain/Account.js"
import { ValidationFailed } from "../Domain/Errors.js"
import * as Money from "../Domain/Money.js"
import {
  MAX_SPEND_GROUPS,
  type SpendBoundValue,
  spendDimensions,
  SpendGroup,
  type SpendGroupBy,
  SpendReport,
  SpendTotal,
  spendWindow
} from "../Domain/Spend.js"
import { Settings } from "../Settings.js"
import { SpendReportRepo } from "./ReportRepo.js"

/** Rows are decoded already, so the domain values are built without validating them twice. */
const trusted = { disableValidation: true } as const

const noSpend = new SpendTotal({ spent_usd: Money.zero, unfunded_usd: Money.zero, sessions: 0 }, trusted)

/**
 * The spend report (D16, D19): what the account's sessions spent, grouped by one to three of
 * repository, user, model, a label, day or month, read from the running totals the settlement
 * transaction keeps, never from the ledger; its days and months are the account's zone's (D22).
 */
export class SpendReports extends Effect.Service<SpendReports>()("SpendControls/Reports", {
  effect: Effect.gen(function*() {
    const repo = yield* SpendReportRepo
    const settings = yield* Settings

    /** Runs for every report read, as a ledger page does, so it is not traced. */
    const report = Effect.fnUntraced(function*(
      account: Account,
      query: {
        readonly group_by: SpendGroupBy
        readonly from: SpendBoundValue | undefined
        readonly to: SpendBoundValue | undefined
      }
    ) {
      const dimensions = spendDimensions(query.group_by)
      if (Either.isLeft(dimensions)) return yield* ValidationFailed.at("#/query/group_by", dimensions.left)
      const { timezone } = yield* settings.get(account)
      const window = spendWindow(yield* DateTime.now, timezone, query)
      if (Either.isLeft(window)) return yield* ValidationFailed.at("#/query/to", window.left)
      const { from, fromDay, to, toDay } = window.right
      const count = dimensions.right.length
      const rows = yield* repo.report({
        account_kind: account.kind,
        account_id: account.id,
        from: fromDay,
        to: toDay,
        dimensions: dimensions.right,
        limit: MAX_SPEND_GROUPS
      })
      const total = rows.find((row) => row.is_total)
      return new SpendReport({
        from,
        to,
        group_by: dimensions.right.join(","),
        groups: rows.filter((row) => !row.is_total).map(({ k1, k2, k3, spent_usd, sessions, unfunded_usd }) => {
          const keys = [k1, k2, k3].slice(0, count)
          // D16's `key` stays for one dimension; with more, `keys` alone says which group it is (D19).
          return new SpendGroup(
            count === 1
              ? { key: k1, keys, spent_usd, unfunded_usd, sessions }
              : { keys, spent_usd, unfunded_usd, sessions },
            trusted
          )
        }),
        total: total === undefined ? noSpend : new SpendTotal({
          spent_usd: total.spent_usd,
          unfunded_usd: total.unfunded_usd,
          sessions: total.sessions
        }, trusted)
      }, trusted)
    })

    return { report } as const
  }),
  dependencies: [SpendReportRepo.Default, Settings.Default]
}) {}
