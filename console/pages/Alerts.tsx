import type { AccountApiClient } from "@account-api/client/web"
import { ConflictPanel } from "../components/ConflictPanel.js"
import { Field, SelectField } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { wholeNumber } from "../format.js"
import { useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

type Alerts = Awaited<ReturnType<AccountApiClient["getAlerts"]>>
type Threshold = Alerts["thresholds"][number]

/** A threshold is an amount or a percentage of the budget: the two shapes the service takes (D17). */
type ThresholdKind = "amount_usd" | "percent_of_budget"

interface ThresholdRow {
  readonly key: string
  readonly kind: ThresholdKind
  /** The amount as typed (a decimal string), or the percentage's digits. */
  readonly value: string
}

const KINDS: ReadonlyArray<{ readonly value: ThresholdKind; readonly label: string }> = [
  { value: "amount_usd", label: "Available falls below an amount (USD)" },
  { value: "percent_of_budget", label: "Available falls below a percentage of the budget" }
]

let newRows = 0
const rowKey = () => `threshold-${++newRows}`

const rowOf = (threshold: Threshold): ThresholdRow =>
  "amount_usd" in threshold
    ? { key: rowKey(), kind: "amount_usd", value: threshold.amount_usd }
    : { key: rowKey(), kind: "percent_of_budget", value: String(threshold.percent_of_budget) }

/** A percentage is a whole number, not money: the one figure here read as a number. */
const thresholdOf = (row: ThresholdRow): Threshold =>
  row.kind === "amount_usd" ? { amount_usd: row.value } : { percent_of_budget: wholeNumber(row.value) }

const ThresholdText = ({ threshold }: { readonly threshold: Threshold }) =>
  "amount_usd" in threshold
    ? (
      <>
        Below <Money value={threshold.amount_usd} />
      </>
    )
    : <>Below {threshold.percent_of_budget}% of the budget</>

const ThresholdList = ({ thresholds }: { readonly thresholds: ReadonlyArray<Threshold> }) => (
  <ul>
    {thresholds.length === 0
      ? <li>No alerts</li>
      : thresholds.map((threshold, index) => (
        <li key={index}>
          <ThresholdText threshold={threshold} />
        </li>
      ))}
  </ul>
)

/**
 * Balance alerts (D17): a `wallet.balance_low` event (and webhook) when `available_usd` falls
 * below a threshold. Every member sees them; an administrator edits the list from the version read.
 */
export const Alerts = () => {
  const signedIn = useSignedIn()
  const alerts = useVersioned({
    load: (api) => api.getAlerts(),
    toDraft: (record): ReadonlyArray<ThresholdRow> => record.thresholds.map(rowOf),
    save: (api, rows, expected_version) => api.replaceAlerts({ expected_version, thresholds: rows.map(thresholdOf) })
  })
  const { base, draft, errors } = alerts
  const change = (key: string, patch: Partial<Omit<ThresholdRow, "key">>) => {
    if (draft !== undefined) alerts.setDraft(draft.map((row) => row.key === key ? { ...row, ...patch } : row))
  }
  return (
    <>
      <h1>Alerts</h1>
      <ProblemBanner
        problem={alerts.loaded.problem}
        retryInSeconds={alerts.loaded.retryInSeconds}
        onRetry={alerts.loaded.reload}
      />
      {base !== undefined && (
        <section class="card" aria-labelledby="alerts-now-title">
          <h2 id="alerts-now-title">Alerts now (version {base.version})</h2>
          <ThresholdList thresholds={base.thresholds} />
        </section>
      )}
      {signedIn.isAdmin && draft !== undefined && (
        <section class="card" aria-labelledby="alerts-form-title">
          <h2 id="alerts-form-title">Edit the alerts</h2>
          <ProblemBanner problem={alerts.problem} onRetry={() => void alerts.save()} />
          {errors["thresholds"] !== undefined && <p class="field-error">{errors["thresholds"]}</p>}
          {alerts.conflict !== undefined && (
            <ConflictPanel
              detail={alerts.conflict.detail}
              current={<ThresholdList thresholds={alerts.conflict.current.thresholds} />}
              mine={<ThresholdList thresholds={draft.map(thresholdOf)} />}
              onApplyMine={() => void alerts.applyMine()}
              onKeepCurrent={alerts.keepCurrent}
            />
          )}
          <form
            class="rows"
            onSubmit={(event) => {
              event.preventDefault()
              void alerts.save()
            }}
          >
            {draft.map((row, index) => {
              const at = `thresholds/${index}`
              return (
                <fieldset class="row" key={row.key}>
                  <legend>Alert {index + 1}</legend>
                  {errors[at] !== undefined && <p class="field-error">{errors[at]}</p>}
                  <SelectField
                    id={`${row.key}-kind`}
                    label="When"
                    value={row.kind}
                    options={KINDS}
                    onChange={(kind) => change(row.key, { kind })}
                  />
                  <Field
                    id={`${row.key}-value`}
                    label={row.kind === "amount_usd" ? "Amount (USD)" : "Percentage of the budget"}
                    inputMode={row.kind === "amount_usd" ? "decimal" : "numeric"}
                    value={row.value}
                    onValue={(value) => change(row.key, { value })}
                    error={errors[`${at}/${row.kind}`]}
                    required
                  />
                  <div class="actions">
                    <button
                      type="button"
                      class="secondary"
                      onClick={() => alerts.setDraft(draft.filter((other) => other.key !== row.key))}
                    >
                      Remove alert {index + 1}
                    </button>
                  </div>
                </fieldset>
              )
            })}
            <div class="actions">
              <button
                type="button"
                class="secondary"
                onClick={() => alerts.setDraft([...draft, { key: rowKey(), kind: "amount_usd", value: "" }])}
              >
                Add an alert
              </button>
              <button type="submit" disabled={alerts.saving || alerts.conflict !== undefined}>Save the alerts</button>
            </div>
            <p role="status">{alerts.saved === undefined ? "" : `Alerts saved (version ${alerts.saved.version}).`}</p>
          </form>
        </section>
      )}
    </>
  )
}
