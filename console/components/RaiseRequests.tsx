import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { type Directory, useDirectory, userName } from "../directory.js"
import { limitWords } from "../events.js"
import { amountInput, formatLocalTime, isoToLocalInput, localInputToIso, localZone } from "../format.js"
import { useAction } from "../session.js"
import { Field } from "./Field.js"
import { Money } from "./Money.js"
import { ProblemBanner } from "./ProblemBanner.js"
import type { RaiseRequest } from "./RaiseDialog.js"

type Limit = Awaited<ReturnType<AccountApiClient["getLimits"]>>["limits"][number]

/** The limit a request names, in words; "a limit since removed" once a PUT took it away. */
const limitOfRequest = (directory: Directory, limits: ReadonlyArray<Limit>, request: RaiseRequest) => {
  const limit = limits.find((one) => one.id === request.limit_id)
  return limit === undefined ? "a limit since removed" : limitWords(directory, limit)
}

const STATE_WORDS = { pending: "Pending", approved: "Approved", declined: "Declined" } as const

/** What became of a request: waiting, approved (for what, until when, by whom), declined (by whom, why). */
const Outcome = ({ request }: { readonly request: RaiseRequest }) => {
  const directory = useDirectory()
  switch (request.state) {
    case "pending":
      return <>Waiting for an administrator.</>
    case "approved":
      return (
        <>
          Approved by {userName(directory, request.decided_by)}: raised to <Money value={request.approved_amount_usd} />
          {" "}
          until {formatLocalTime(request.approved_until)}.
        </>
      )
    case "declined":
      return (
        <>
          Declined by {userName(directory, request.decided_by)}
          {request.decline_reason === null ? "." : `: ${request.decline_reason}`}
        </>
      )
  }
}

/** One request: its state, its limit, what was asked until when and why, and what became of it. */
const RequestLine = (
  { request, limits, who }: {
    readonly request: RaiseRequest
    readonly limits: ReadonlyArray<Limit>
    readonly who: boolean
  }
) => {
  const directory = useDirectory()
  return (
    <p>
      <strong class={`state state-${request.state}`} data-field="state">{STATE_WORDS[request.state]}</strong>:{" "}
      {who && `${userName(directory, request.requested_by)} asked for `}
      {limitOfRequest(directory, limits, request)} to <Money value={request.amount_usd} /> until{" "}
      {formatLocalTime(request.until)}, because "{request.reason}". <Outcome request={request} />
    </p>
  )
}

/** The signed-in member's own requests, newest first: pending and decided. */
export const MyRequests = (
  { requests, limits }: { readonly requests: ReadonlyArray<RaiseRequest>; readonly limits: ReadonlyArray<Limit> }
) =>
  requests.length === 0
    ? <p class="muted">You have asked for no raise.</p>
    : (
      <ul class="requests" aria-label="Your raise requests, newest first">
        {requests.map((request) => (
          <li key={request.id} data-request={request.id}>
            <RequestLine request={request} limits={limits} who={false} />
          </li>
        ))}
      </ul>
    )

/**
 * A pending request for an administrator: approve it as asked or for less (the amount and end
 * start as asked; only what was changed is sent), or decline it with an optional reason. A 409
 * (decided meanwhile, its limit gone) or a 422 is said here; `onDecided` reads the list again.
 */
const Decide = (
  { request, limits, onDecided }: {
    readonly request: Extract<RaiseRequest, { readonly state: "pending" }>
    readonly limits: ReadonlyArray<Limit>
    readonly onDecided: () => void
  }
) => {
  const askedAmount = amountInput(request.amount_usd)
  const askedUntil = isoToLocalInput(request.until)
  const [amount, setAmount] = useState(askedAmount)
  const [until, setUntil] = useState(askedUntil)
  const [reason, setReason] = useState("")
  const approve = useAction((api, body: { amount_usd?: string; until?: string }) =>
    api.approveRaiseRequest(request.id, body)
  )
  const decline = useAction((api, body: { reason?: string }) => api.declineRaiseRequest(request.id, body))
  const problem = approve.problem ?? decline.problem
  const directory = useDirectory()
  const id = `decide-${request.id}`
  const after = (decided: unknown) => {
    if (decided !== undefined) onDecided()
  }
  return (
    <li data-request={request.id}>
      <RequestLine request={request} limits={limits} who />
      {problem?.status === 409 && (
        <div class="banner banner-error" role="alert">
          <p class="banner-title">Nothing was changed.</p>
          <p>{problem.detail}</p>
          <button type="button" class="secondary" onClick={onDecided}>Read the requests again</button>
        </div>
      )}
      {problem !== undefined && problem.status !== 409 && <ProblemBanner problem={problem} />}
      <fieldset class="row">
        <legend>Decide {userName(directory, request.requested_by)}'s request</legend>
        <Field
          id={`${id}-amount`}
          label="Approve for (USD)"
          hint="What was asked, or less"
          inputMode="decimal"
          value={amount}
          onValue={setAmount}
          error={approve.errors["amount_usd"]}
        />
        <Field
          id={`${id}-until`}
          label="Approve until"
          type="datetime-local"
          hint={`What was asked, or sooner; in your time zone (${localZone()})`}
          value={until}
          onValue={setUntil}
          error={approve.errors["until"]}
        />
        <div class="actions">
          <button
            type="button"
            disabled={approve.pending || decline.pending}
            onClick={() =>
              void approve.run({
                ...(amount.trim() === askedAmount ? {} : { amount_usd: amount.trim() }),
                ...(until === askedUntil ? {} : { until: localInputToIso(until) })
              }).then(after)}
          >
            Approve
          </button>
        </div>
        <Field
          id={`${id}-reason`}
          label="Reason to decline (optional)"
          value={reason}
          onValue={setReason}
          error={decline.errors["reason"]}
        />
        <div class="actions">
          <button
            type="button"
            class="secondary"
            disabled={approve.pending || decline.pending}
            onClick={() => void decline.run(reason.trim() === "" ? {} : { reason }).then(after)}
          >
            Decline
          </button>
        </div>
      </fieldset>
    </li>
  )
}

/** The account's pending requests for an administrator to decide, newest first. */
export const PendingRequests = (
  { requests, limits, onDecided }: {
    readonly requests: ReadonlyArray<RaiseRequest>
    readonly limits: ReadonlyArray<Limit>
    readonly onDecided: () => void
  }
) => {
  const pending = requests.flatMap((request) => request.state === "pending" ? [request] : [])
  return pending.length === 0
    ? <p class="muted">No request is waiting.</p>
    : (
      <ul class="requests" aria-label="Raise requests to decide, newest first">
        {pending.map((request) => <Decide key={request.id} request={request} limits={limits} onDecided={onDecided} />)}
      </ul>
    )
}
