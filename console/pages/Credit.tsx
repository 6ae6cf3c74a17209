import { useState } from "preact/hooks"
import { Field } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { RecentLedger } from "../components/RecentLedger.js"
import { useAction, useSignedIn } from "../session.js"

interface CreditInput {
  readonly amount_usd: string
  readonly note: string
}

/**
 * Adds credit to the budget (`POST /developer/account/wallet/credits`, administrators, D6). The
 * action's idempotency key (session.ts) is sent again when the person retries after no answer,
 * so a credit whose answer was lost is added once.
 */
export const Credit = () => {
  const signedIn = useSignedIn()
  const [input, setInput] = useState<CreditInput>({ amount_usd: "", note: "" })
  const [added, setAdded] = useState<string | undefined>(undefined)
  const [round, setRound] = useState(0)
  const credit = useAction((api, credit: CreditInput, idempotency_key: string) =>
    api.addCredit({
      amount_usd: credit.amount_usd,
      idempotency_key,
      ...(credit.note === "" ? {} : { note: credit.note })
    })
  )
  const submit = async () => {
    setAdded(undefined)
    const wallet = await credit.run(input)
    if (wallet === undefined) return
    setAdded(wallet.budget_usd)
    setInput({ amount_usd: "", note: "" })
    setRound((n) => n + 1)
  }
  if (!signedIn.isAdmin) {
    return (
      <>
        <h1>Credit</h1>
        <p>Adding credit is for the account's administrators. Ask one of them to add it.</p>
      </>
    )
  }
  return (
    <>
      <h1>Credit</h1>
      <section class="card" aria-labelledby="credit-form-title">
        <h2 id="credit-form-title">Add credit</h2>
        <p class="muted">Raises the budget by this amount. No payment is taken: it records a decision.</p>
        <ProblemBanner problem={credit.problem} onRetry={() => void submit()} />
        <form
          onSubmit={(event) => {
            event.preventDefault()
            void submit()
          }}
        >
          <Field
            id="amount_usd"
            label="Amount (USD)"
            hint="Above zero, up to six decimals: 250 or 99.5"
            inputMode="decimal"
            value={input.amount_usd}
            onValue={(amount_usd) => setInput({ ...input, amount_usd })}
            error={credit.errors["amount_usd"]}
            required
          />
          <Field
            id="credit-note"
            label="Note (optional)"
            hint="Kept on the ledger entry"
            value={input.note}
            onValue={(note) => setInput({ ...input, note })}
            error={credit.errors["note"]}
          />
          <div class="actions">
            <button type="submit" disabled={credit.pending}>Add credit</button>
          </div>
          <p role="status">
            {added === undefined ? "" : (
              <>
                Credit added: the budget is now <Money value={added} />.
              </>
            )}
          </p>
        </form>
      </section>
      <RecentLedger round={round} />
    </>
  )
}
