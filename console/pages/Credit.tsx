import type { AccountApiClient } from "@account-api/client/web"
import { useEffect, useRef, useState } from "preact/hooks"
import { Field, SelectField } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { RecentLedger } from "../components/RecentLedger.js"
import { formatLocalTime, localInputToIso, localZone, wholeNumber } from "../format.js"
import { grantTitle } from "../grants.js"
import { useAction, useSignedIn } from "../session.js"

type Category = "paid" | "promotional"
type CreditAdded = Awaited<ReturnType<AccountApiClient["addCredit"]>>

interface CreditInput {
  readonly amount_usd: string
  readonly note: string
  /** What the `datetime-local` input holds, in the browser's zone; "" never expires. */
  readonly expires_at: string
  readonly priority: string
  readonly category: Category
}

/** D21's defaults: priority 50, paid, never expiring. */
const EMPTY: CreditInput = { amount_usd: "", note: "", expires_at: "", priority: "50", category: "paid" }

const CATEGORIES: ReadonlyArray<{ readonly value: Category; readonly label: string }> = [
  { value: "paid", label: "Paid" },
  { value: "promotional", label: "Promotional" }
]

/**
 * Adds credit to the budget as a grant (`POST /developer/account/wallet/credits`, administrators,
 * D6, D21): an amount and a note, and when it expires (typed in the browser's zone, sent as ISO
 * 8601 with that zone's offset), its priority and its category. The action's idempotency key
 * (session.ts) is sent again when the person retries after no answer, so a credit whose answer
 * was lost is added once. A 422 shows at the field it names, which takes the focus.
 */
export const Credit = () => {
  const signedIn = useSignedIn()
  const [input, setInput] = useState<CreditInput>(EMPTY)
  const [added, setAdded] = useState<CreditAdded | undefined>(undefined)
  const [round, setRound] = useState(0)
  const form = useRef<HTMLFormElement>(null)
  const credit = useAction((api, credit: CreditInput, idempotency_key: string) =>
    api.addCredit({
      amount_usd: credit.amount_usd,
      idempotency_key,
      ...(credit.note === "" ? {} : { note: credit.note }),
      ...(credit.expires_at === "" ? {} : { expires_at: localInputToIso(credit.expires_at) }),
      // Not a whole number from 0 to 999: sent as null, for the service to refuse at its field.
      ...(credit.priority.trim() === "" ? {} : { priority: wholeNumber(credit.priority.trim()) }),
      category: credit.category
    })
  )
  const submit = async () => {
    setAdded(undefined)
    const wallet = await credit.run(input)
    if (wallet === undefined) return
    setAdded(wallet)
    setInput(EMPTY)
    setRound((n) => n + 1)
  }
  // A 422: the first field it names takes the focus, as the limits' form does.
  useEffect(() => {
    if (credit.problem?.status === 422) form.current?.querySelector<HTMLElement>("[aria-invalid=true]")?.focus()
  }, [credit.problem])
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
        <p class="muted">
          Raises the budget by this amount, as a grant that sessions draw in order (see{" "}
          <a href="#/grants">the grants</a>). No payment is taken: it records a decision.
        </p>
        <ProblemBanner problem={credit.problem} onRetry={() => void submit()} />
        <form
          ref={form}
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
            hint="Kept on the ledger entry; the grant goes by it"
            value={input.note}
            onValue={(note) => setInput({ ...input, note })}
            error={credit.errors["note"]}
          />
          <Field
            id="credit-expires-at"
            label="Expires (optional)"
            type="datetime-local"
            hint={`In your time zone (${localZone()}). Empty: the credit never expires.`}
            value={input.expires_at}
            onValue={(expires_at) => setInput({ ...input, expires_at })}
            error={credit.errors["expires_at"]}
          />
          <Field
            id="credit-priority"
            label="Priority"
            hint="0 to 100: grants with a lower priority are drawn first. 50 unless you change it."
            inputMode="numeric"
            value={input.priority}
            onValue={(priority) => setInput({ ...input, priority })}
            error={credit.errors["priority"]}
          />
          <SelectField
            id="credit-category"
            label="Category"
            hint="Paid credit was bought; promotional credit was given. Of two grants otherwise alike, promotional is drawn first."
            value={input.category}
            options={CATEGORIES}
            onChange={(category) => setInput({ ...input, category })}
            error={credit.errors["category"]}
          />
          <div class="actions">
            <button type="submit" disabled={credit.pending}>Add credit</button>
          </div>
          <p role="status">
            {added === undefined ? "" : (
              <>
                Credit added: the budget is now <Money value={added.budget_usd} />. {grantTitle(added.grant)}:{" "}
                <Money value={added.grant.amount_usd} />, priority {added.grant.priority}, {added.grant.category},{" "}
                {added.grant.expires_at === null
                  ? "never expires"
                  : `expires on ${formatLocalTime(added.grant.expires_at)}`}.
              </>
            )}
          </p>
        </form>
      </section>
      <RecentLedger round={round} />
    </>
  )
}
