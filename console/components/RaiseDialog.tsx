import type { AccountApiClient } from "@account-api/client/web"
import { useEffect, useRef, useState } from "preact/hooks"
import { useDirectory } from "../directory.js"
import { limitWords } from "../events.js"
import { formatUsd, isoToLocalInput, localInputToIso, localZone } from "../format.js"
import { useAction } from "../session.js"
import { Field } from "./Field.js"
import { Money } from "./Money.js"
import { ProblemBanner } from "./ProblemBanner.js"

type Limit = Awaited<ReturnType<AccountApiClient["getLimits"]>>["limits"][number]
export type RaiseRequest = Awaited<ReturnType<AccountApiClient["listRaiseRequests"]>>["requests"][number]

const WEEK_MS = 7 * 86_400_000

/**
 * "Request more" (D22): a member asks an administrator for a temporary raise of a spend limit,
 * in a modal dialog: the amount (above the limit's), until when (typed in the browser's zone,
 * sent with its offset, within 90 days) and why. A 422 shows at its field; a 409 (too many
 * pending requests) is said above the form. Escape or "Cancel" closes it, sending nothing.
 */
export const RaiseDialog = (
  { limit, onAsked, onClose }: {
    readonly limit: Limit
    readonly onAsked: (request: RaiseRequest) => void
    readonly onClose: () => void
  }
) => {
  const directory = useDirectory()
  const dialog = useRef<HTMLDialogElement>(null)
  const [amount, setAmount] = useState("")
  const [until, setUntil] = useState(() => isoToLocalInput(new Date(Date.now() + WEEK_MS).toISOString()))
  const [reason, setReason] = useState("")
  const ask = useAction((api, body: { amount_usd: string; until: string; reason: string }) =>
    api.requestLimitRaise({ limit_id: limit.id, ...body })
  )
  useEffect(() => {
    dialog.current?.showModal()
  }, [])
  const errors = ask.errors
  const submit = async () => {
    const asked = await ask.run({ amount_usd: amount.trim(), until: localInputToIso(until), reason })
    if (asked !== undefined) {
      onAsked(asked)
      dialog.current?.close()
    }
  }
  return (
    <dialog ref={dialog} class="confirm-dialog" aria-labelledby="raise-title" onClose={onClose}>
      <h2 id="raise-title">Request more</h2>
      <p>
        For {limitWords(directory, limit)}, now{" "}
        <Money value={limit.effective_amount_usd ?? "0"} />. An administrator approves it, perhaps for less, or declines
        it.
      </p>
      <ProblemBanner problem={ask.problem} onRetry={() => void submit()} />
      {errors["limit_id"] !== undefined && <p class="field-error">{errors["limit_id"]}</p>}
      <form
        onSubmit={(event) => {
          event.preventDefault()
          void submit()
        }}
      >
        <Field
          id="raise-amount"
          label="Raise to (USD)"
          hint={`More than the limit's ${formatUsd(limit.amount_usd ?? "0")}`}
          inputMode="decimal"
          value={amount}
          onValue={setAmount}
          error={errors["amount_usd"]}
          required
        />
        <Field
          id="raise-until"
          label="Until"
          type="datetime-local"
          hint={`In your time zone (${localZone()}), within 90 days`}
          value={until}
          onValue={setUntil}
          error={errors["until"]}
          required
        />
        <Field
          id="raise-reason"
          label="Why"
          hint="1 to 500 characters, for the administrator who decides"
          value={reason}
          onValue={setReason}
          error={errors["reason"]}
          required
        />
        <div class="actions">
          <button type="submit" disabled={ask.pending}>Send the request</button>
          <button type="button" class="secondary" onClick={() => dialog.current?.close()}>Cancel</button>
        </div>
      </form>
    </dialog>
  )
}
