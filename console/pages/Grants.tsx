import type { AccountApiError } from "@account-api/client/web"
import { useEffect, useRef, useState } from "preact/hooks"
import { GrantBar } from "../components/GrantBar.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { formatLocalTime, formatTime, shortId } from "../format.js"
import { type Grant, grantTitle } from "../grants.js"
import { useAction, useLiveChanges, useLoad, useSignedIn } from "../session.js"

const STATE_WORDS: Readonly<Record<Grant["state"], string>> = {
  live: "Live",
  used: "Used up",
  expired: "Expired",
  voided: "Voided"
}

const expiryWords = (grant: Grant): string =>
  grant.expires_at === null
    ? "Never expires"
    : `${grant.state === "expired" ? "Expired" : grant.state === "live" ? "Expires" : "Was to expire"} on ${
      formatLocalTime(grant.expires_at)
    }`

/** A void's refusals (D21), said plainly: nothing was voided, and why. */
const VoidRefused = ({ problem }: { readonly problem: AccountApiError }) => (
  <div class="banner banner-error" role="alert">
    <p class="banner-title">
      {problem.code === "grant_not_live"
        ? `Nothing was voided: this grant is no longer live (${
          problem.state === undefined ? "ended" : STATE_WORDS[problem.state].toLowerCase()
        }).`
        : "Nothing was voided: this grant was not found."}
    </p>
    <p>{problem.detail}</p>
    <p>The list below is as the service has it now.</p>
  </div>
)

/**
 * Asks before voiding (a modal dialog, Escape or "Keep it" to step back, the safe choice focused):
 * a void ends the grant at once and cannot be undone.
 */
const VoidDialog = (
  { grant, onVoid, onClose }: {
    readonly grant: Grant
    readonly onVoid: () => void
    readonly onClose: () => void
  }
) => {
  const dialog = useRef<HTMLDialogElement>(null)
  useEffect(() => {
    dialog.current?.showModal()
  }, [])
  return (
    <dialog
      ref={dialog}
      class="confirm-dialog"
      aria-labelledby="void-title"
      aria-describedby="void-what"
      onClose={onClose}
    >
      <h2 id="void-title">Void {grantTitle(grant)}?</h2>
      <p id="void-what">
        Its free <Money value={grant.free_usd} />{" "}
        leaves the budget now, and no session draws on it again. What open sessions hold on it (<Money
          value={grant.held_usd}
        />) stays theirs until they release it. This cannot be undone.
      </p>
      <div class="actions">
        <button type="button" class="secondary" autoFocus onClick={() => dialog.current?.close()}>Keep it</button>
        <button type="button" class="danger" onClick={onVoid}>Void the grant</button>
      </div>
    </dialog>
  )
}

const GrantItem = (
  { grant, canVoid, onVoid }: {
    readonly grant: Grant
    readonly canVoid: boolean
    readonly onVoid: (grant: Grant) => void
  }
) => {
  const heading = `grant-${grant.id}`
  return (
    <li class="card grant" aria-labelledby={heading} data-grant={grant.id}>
      <h3 id={heading} class="grant-name">
        {grantTitle(grant)}: <Money value={grant.amount_usd} />
      </h3>
      <GrantBar grant={grant} />
      <dl class="grant-terms">
        <div>
          <dt>State</dt>
          <dd data-field="state">{STATE_WORDS[grant.state]}</dd>
        </div>
        <div>
          <dt>Priority</dt>
          <dd data-field="priority">{grant.priority}</dd>
        </div>
        <div>
          <dt>Category</dt>
          <dd data-field="category">{grant.category === "paid" ? "Paid" : "Promotional"}</dd>
        </div>
        <div>
          <dt>Expiry</dt>
          <dd data-field="expires_at">
            {grant.expires_at === null
              ? expiryWords(grant)
              : <time dateTime={grant.expires_at}>{expiryWords(grant)}</time>}
          </dd>
        </div>
        <div>
          <dt>Note</dt>
          <dd class="note" data-field="note">{grant.note ?? "—"}</dd>
        </div>
        <div>
          <dt>Added</dt>
          <dd>
            {formatTime(grant.created_at)} <span class="muted" title={grant.id}>(id {shortId(grant.id)})</span>
          </dd>
        </div>
      </dl>
      {canVoid && grant.state === "live" && (
        <div class="actions">
          <button type="button" class="secondary" onClick={() => onVoid(grant)}>
            Void<span class="visually-hidden">{` ${grantTitle(grant)}`}</span>
          </button>
        </div>
      )}
    </li>
  )
}

/**
 * Every credit grant of the wallet (D21, `GET /developer/account/wallet/grants?state=all`): the
 * live ones in the order sessions draw them (the order the service answers), then the ended ones,
 * newest first; each with a bar of what was drawn, is held, is free and ended, and its terms.
 * Read again on each change the live stream tells (a reserve, a spend, a credit, an expiry). An
 * administrator may void a live grant, after a confirmation; a 409 or 404 says nothing was voided.
 */
export const Grants = () => {
  const signedIn = useSignedIn()
  const changes = useLiveChanges()
  const [round, setRound] = useState(0)
  const grants = useLoad((api) => api.listGrants({ state: "all" }), [changes, round])
  const [confirming, setConfirming] = useState<Grant | undefined>(undefined)
  const [voided, setVoided] = useState<Grant | undefined>(undefined)
  const voiding = useAction((api, id: string, idempotency_key: string) => api.voidGrant(id, { idempotency_key }))
  // The grant last asked about, for "Try again" after no answer (the action's key is kept).
  const lastTried = useRef<Grant | undefined>(undefined)
  const runVoid = async (grant: Grant) => {
    lastTried.current = grant
    setConfirming(undefined)
    setVoided(undefined)
    const done = await voiding.run(grant.id)
    if (done === undefined) return
    setVoided(done)
    setRound((n) => n + 1)
  }
  const problem = voiding.problem
  const refusal = problem !== undefined && (problem.code === "grant_not_live" || problem.code === "grant_not_found")
  // Not live or not found: the list is read again, to show the grant as the service has it.
  useEffect(() => {
    if (refusal) setRound((n) => n + 1)
  }, [problem])

  const all = grants.data?.grants ?? []
  const live = all.filter((grant) => grant.state === "live")
  const ended = all.filter((grant) => grant.state !== "live")
  const onVoid = (grant: Grant) => setConfirming(grant)
  return (
    <>
      <h1>Grants</h1>
      <p>
        Every credit is a grant: its amount, what sessions have drawn from it, what open sessions hold on it, what is
        free, and what has ended (expired or voided). Expiries are shown in your time zone.
      </p>
      <ProblemBanner problem={grants.problem} retryInSeconds={grants.retryInSeconds} onRetry={grants.reload} />
      {problem !== undefined && refusal && <VoidRefused problem={problem} />}
      {problem !== undefined && !refusal && (
        <ProblemBanner
          problem={problem}
          onRetry={() => {
            if (lastTried.current !== undefined) void runVoid(lastTried.current)
          }}
        />
      )}
      <p role="status">
        {voided === undefined ? "" : (
          <>
            {grantTitle(voided)} voided: <Money value={voided.ended_usd} /> left the budget.
          </>
        )}
      </p>
      {confirming !== undefined && (
        <VoidDialog
          grant={confirming}
          onVoid={() => void runVoid(confirming)}
          onClose={() => setConfirming(undefined)}
        />
      )}
      <section class="card" aria-labelledby="live-grants-title">
        <h2 id="live-grants-title">Live grants</h2>
        <p id="draw-order">
          Sessions draw on them in this order, first to last: the lowest priority first, then the soonest to expire
          (those that never expire last), then promotional before paid, then the oldest. What is left of the budget
          beyond the grants (set on the Budget page) is drawn after every grant.
        </p>
        {grants.data !== undefined && (
          live.length === 0
            ? <p class="muted">No live grant: sessions draw on the budget that is no grant's.</p>
            : (
              <ol class="grants" aria-label="Live grants, in the order they are drawn" aria-describedby="draw-order">
                {live.map((grant) => (
                  <GrantItem key={grant.id} grant={grant} canVoid={signedIn.isAdmin} onVoid={onVoid} />
                ))}
              </ol>
            )
        )}
      </section>
      <section class="card" aria-labelledby="ended-grants-title">
        <h2 id="ended-grants-title">Ended grants</h2>
        <p>Used up, expired or voided, the newest first.</p>
        {grants.data !== undefined && (
          ended.length === 0
            ? <p class="muted">No grant has ended.</p>
            : (
              <ul class="grants" aria-label="Ended grants, newest first">
                {ended.map((grant) => <GrantItem key={grant.id} grant={grant} canVoid={false} onVoid={onVoid} />)}
              </ul>
            )
        )}
      </section>
    </>
  )
}
