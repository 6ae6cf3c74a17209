import { useRef, useState } from "preact/hooks"
import { ConflictPanel } from "../components/ConflictPanel.js"
import { Field } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { RecentLedger } from "../components/RecentLedger.js"
import { type NextExpiry, WalletCard } from "../components/WalletCard.js"
import { useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

interface BudgetDraft {
  readonly budget_usd: string
  readonly note: string
}

/** The floor (D6): a budget below spent plus reserved is refused with the lowest one possible now. */
const BELOW_COMMITTED = "budget_below_committed"

/**
 * Sets the wallet's total budget (`PUT /developer/account/wallet`, D6) from the version read. The
 * idempotency key is the action's (session.ts): a retry after no answer sends it again.
 */
export const Budget = () => {
  const signedIn = useSignedIn()
  const [round, setRound] = useState(0)
  // A budget set answers the wallet without `next_expiry` (D21): the card keeps the one last read.
  const nextExpiry = useRef<NextExpiry | undefined>(undefined)
  const budget = useVersioned({
    load: async (api) => {
      const wallet = await api.getWallet()
      nextExpiry.current = wallet.next_expiry
      return wallet
    },
    toDraft: (wallet): BudgetDraft => ({ budget_usd: wallet.budget_usd, note: "" }),
    save: async (api, draft, expected_version, idempotency_key) => {
      const wallet = await api.setBudget({
        budget_usd: draft.budget_usd,
        expected_version,
        idempotency_key,
        ...(draft.note === "" ? {} : { note: draft.note })
      })
      setRound((n) => n + 1)
      return { ...wallet, next_expiry: nextExpiry.current ?? null }
    }
  })
  const { base, draft, problem } = budget
  const floor = problem?.code === BELOW_COMMITTED ? problem.minimum_budget_usd : undefined
  return (
    <>
      <h1>Budget</h1>
      <ProblemBanner
        problem={budget.loaded.problem}
        retryInSeconds={budget.loaded.retryInSeconds}
        onRetry={budget.loaded.reload}
      />
      {base !== undefined && <WalletCard wallet={budget.saved ?? base} />}
      {signedIn.isAdmin && draft !== undefined && base !== undefined && (
        <section class="card" aria-labelledby="budget-form-title">
          <h2 id="budget-form-title">Set the total budget</h2>
          <p class="muted">
            The new total, not an addition. Sessions cannot hold more than the budget less what is spent and held.
          </p>
          {floor === undefined
            ? (
              <ProblemBanner
                problem={problem}
                onRetry={() => void budget.save()}
              />
            )
            : (
              <div class="banner banner-error" role="alert">
                <p class="banner-title">That budget is below what is already committed.</p>
                <p>
                  Spent and held by open sessions come to{" "}
                  <Money value={floor} />: the budget can be set to that or more. Sessions holding funds may release
                  some when they end.
                </p>
                <button
                  type="button"
                  class="secondary"
                  onClick={() => budget.setDraft({ ...draft, budget_usd: floor })}
                >
                  Use the lowest possible budget
                </button>
              </div>
            )}
          {budget.conflict !== undefined && (
            <ConflictPanel
              detail={budget.conflict.detail}
              current={
                <p>
                  Budget <Money value={budget.conflict.current.budget_usd} /> (version{" "}
                  {budget.conflict.current.version})
                </p>
              }
              mine={
                <p>
                  Budget <Money value={draft.budget_usd} />
                </p>
              }
              onApplyMine={() => void budget.applyMine()}
              onKeepCurrent={budget.keepCurrent}
            />
          )}
          <form
            onSubmit={(event) => {
              event.preventDefault()
              void budget.save()
            }}
          >
            <Field
              id="budget_usd"
              label="Total budget (USD)"
              hint="A decimal amount, up to six decimals: 1500 or 1500.25"
              inputMode="decimal"
              value={draft.budget_usd}
              onValue={(budget_usd) =>
                budget.setDraft({ ...draft, budget_usd })}
              error={budget.errors["budget_usd"]}
              required
            />
            <Field
              id="budget-note"
              label="Note (optional)"
              hint="Kept on the ledger entry"
              value={draft.note}
              onValue={(note) => budget.setDraft({ ...draft, note })}
              error={budget.errors["note"]}
            />
            <div class="actions">
              <button type="submit" disabled={budget.saving || budget.conflict !== undefined}>Set the budget</button>
            </div>
            <p role="status">
              {budget.saved === undefined ? "" : `Budget set (version ${budget.saved.version}).`}
            </p>
          </form>
        </section>
      )}
      <RecentLedger round={round} />
    </>
  )
}
