import type { NewEvent, Threshold } from "./Events.js"
import * as Money from "./Money.js"
import type { Wallet } from "./Wallet.js"

/**
 * When a wallet change crosses an alert threshold or depletes the wallet (D17), decided from the
 * balances before and after it, in the transaction that makes the change. Pure, so that every
 * writer of a wallet (budget decisions, credits, settlement) decides the same way.
 *
 * A threshold is a state, not a level: the wallet is "low" under it when it is enforced and its
 * available amount is below the threshold's dollars. An event is written when that state
 * changes, so each crossing gives exactly one event however many changes happen on either side
 * of it, and the events can be replayed from the ledger's after-balances alone.
 */

/** What the rule reads of a wallet. */
export interface AlertBalances {
  readonly enforced: boolean
  readonly budget_usd: Money.Decimal
  readonly available_usd: Money.Decimal
}

/**
 * A threshold in dollars for a wallet: its amount, or its percentage of the budget (rounded to
 * the six decimals amounts carry, half up, so that it reads as the amount it is compared as).
 */
export const thresholdUsd = (threshold: Threshold, budget: Money.Decimal): Money.Decimal =>
  "amount_usd" in threshold
    ? threshold.amount_usd
    : Money.decimal(budget.times(threshold.percent_of_budget).dividedBy(100).toFixed(6))

/** Below the threshold: only an enforced wallet is (an unenforced one has no budget to alert on). */
export const isLow = (threshold: Threshold, balances: AlertBalances): boolean =>
  balances.enforced && balances.available_usd.lt(thresholdUsd(threshold, balances.budget_usd))

/** Depleted: an enforced wallet with nothing available. */
export const isDepleted = (balances: AlertBalances): boolean =>
  balances.enforced && balances.available_usd.lte(Money.zero)

export type Crossing =
  | {
    readonly type: "wallet.balance_low" | "wallet.balance_recovered"
    readonly threshold: Threshold
    readonly threshold_usd: Money.Decimal
  }
  | { readonly type: "wallet.depleted" }

/**
 * The crossings of one change, thresholds in the order saved, depletion last. Thresholds are
 * the account's at the time of the change: a threshold saved later does not look back.
 */
export const crossings = (
  thresholds: ReadonlyArray<Threshold>,
  before: AlertBalances,
  after: AlertBalances
): ReadonlyArray<Crossing> => {
  const found: Array<Crossing> = []
  for (const threshold of thresholds) {
    const wasLow = isLow(threshold, before)
    const nowLow = isLow(threshold, after)
    if (wasLow === nowLow) continue
    found.push({
      type: nowLow ? "wallet.balance_low" : "wallet.balance_recovered",
      threshold,
      threshold_usd: thresholdUsd(threshold, after.budget_usd)
    })
  }
  if (!isDepleted(before) && isDepleted(after)) found.push({ type: "wallet.depleted" })
  return found
}

/** The events of one wallet change's crossings (D17), the wallet after the change in each. */
export const crossingEvents = (
  thresholds: ReadonlyArray<Threshold>,
  before: AlertBalances,
  after: Wallet
): ReadonlyArray<NewEvent> =>
  crossings(thresholds, before, after).map((crossing): NewEvent =>
    crossing.type === "wallet.depleted"
      ? { type: crossing.type, data: { wallet: after } }
      : {
        type: crossing.type,
        data: { threshold: crossing.threshold, threshold_usd: crossing.threshold_usd, wallet: after }
      }
  )
