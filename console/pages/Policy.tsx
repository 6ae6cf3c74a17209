import type { AccountApiClient } from "@account-api/client/web"
import { ConflictPanel } from "../components/ConflictPanel.js"
import { type Capabilities, fieldLabel, PolicyControl, type PolicyValue, valueIn } from "../components/PolicyControl.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { useLoad, useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

type AccountPolicy = Awaited<ReturnType<AccountApiClient["getAccountPolicy"]>>
type PolicyFields = AccountPolicy["policy"]

/** The fields whose values differ between two policies, each as `field: value`. */
const Differences = (
  { policy, other, capabilities }: {
    readonly policy: object
    readonly other: object
    readonly capabilities: Capabilities
  }
) => {
  const changed = Object.keys(capabilities.policy).filter((name) => valueIn(policy, name) !== valueIn(other, name))
  return (
    <ul>
      {changed.length === 0 ? <li>The same values</li> : changed.map((name) => (
        <li key={name}>
          {fieldLabel(name)}: {String(valueIn(policy, name))}
        </li>
      ))}
    </ul>
  )
}

/**
 * The account's autonomy policy (D4, D5). Its controls are built from the capabilities read, one
 * per field in the order answered, each value enabled only when accepted and effective (a value
 * that is not is disabled with the reason): the console holds no list of fields or values.
 * Every member reads it; an administrator saves it from the version read.
 */
export const Policy = () => {
  const signedIn = useSignedIn()
  const capabilities = useLoad((api) => api.getCapabilities(), [])
  const policy = useVersioned({
    load: (api) => api.getAccountPolicy(),
    toDraft: (record): PolicyFields => record.policy,
    save: (api, draft, expected_version) => api.replaceAccountPolicy({ policy: draft, expected_version })
  })
  const { base, draft, errors } = policy
  const caps = capabilities.data
  const choose = (name: string, value: PolicyValue | undefined) => {
    // The service checks every value against its catalog (a refused one is a 422 at its field).
    if (draft !== undefined && value !== undefined) policy.setDraft({ ...draft, [name]: value })
  }
  return (
    <>
      <h1>Policy</h1>
      <p class="muted">What the account's agents may do without asking. Repositories may override it.</p>
      <ProblemBanner
        problem={capabilities.problem}
        retryInSeconds={capabilities.retryInSeconds}
        onRetry={capabilities.reload}
      />
      <ProblemBanner
        problem={policy.loaded.problem}
        retryInSeconds={policy.loaded.retryInSeconds}
        onRetry={policy.loaded.reload}
      />
      {caps !== undefined && base !== undefined && !signedIn.isAdmin && (
        <section class="card" aria-labelledby="policy-now-title">
          <h2 id="policy-now-title">The account policy (version {base.version})</h2>
          <dl class="policy-values">
            {Object.keys(caps.policy).map((name) => (
              <div key={name}>
                <dt>{fieldLabel(name)}</dt>
                <dd>{String(valueIn(base.policy, name))}</dd>
              </div>
            ))}
          </dl>
        </section>
      )}
      {caps !== undefined && base !== undefined && draft !== undefined && signedIn.isAdmin && (
        <section class="card" aria-labelledby="policy-form-title">
          <h2 id="policy-form-title">The account policy (version {base.version})</h2>
          <ProblemBanner
            problem={policy.problem}
            onRetry={() =>
              void policy.save()}
          />
          {policy.conflict !== undefined && (
            <ConflictPanel
              detail={policy.conflict.detail}
              current={<Differences policy={policy.conflict.current.policy} other={draft} capabilities={caps} />}
              mine={<Differences policy={draft} other={policy.conflict.current.policy} capabilities={caps} />}
              onApplyMine={() => void policy.applyMine()}
              onKeepCurrent={policy.keepCurrent}
            />
          )}
          <form
            class="policy-form"
            onSubmit={(event) => {
              event.preventDefault()
              void policy.save()
            }}
          >
            {Object.entries(caps.policy).map(([name, capability]) => (
              <PolicyControl
                key={name}
                name={name}
                capability={capability}
                value={valueIn(draft, name)}
                onChange={(value) => choose(name, value)}
                error={errors[`policy/${name}`]}
              />
            ))}
            {errors["policy"] !== undefined && <p class="field-error">{errors["policy"]}</p>}
            <div class="actions">
              <button type="submit" disabled={policy.saving || policy.conflict !== undefined}>Save the policy</button>
            </div>
            <p role="status">{policy.saved === undefined ? "" : `Policy saved (version ${policy.saved.version}).`}</p>
          </form>
        </section>
      )}
    </>
  )
}
