import type { AccountApiClient } from "@account-api/client/web"
import { Field, SelectField } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { VersionedListForm } from "../components/VersionedListForm.js"
import { amountInput, wholeNumber } from "../format.js"
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
    ? { key: rowKey(), kind: "amount_usd", value: amountInput(threshold.amount_usd) }
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
          <VersionedListForm
            versioned={alerts}
            noun="alert"
            pointer="thresholds"
            newRow={(): ThresholdRow => ({ key: rowKey(), kind: "amount_usd", value: "" })}
            summary={(row) => row.value === "" ? "A new alert" : <ThresholdText threshold={thresholdOf(row)} />}
            currentList={(record) => <ThresholdList thresholds={record.thresholds} />}
            mineList={(rows) => <ThresholdList thresholds={rows.map(thresholdOf)} />}
            editor={(row, at, change) => (
              <>
                <SelectField
                  id={`${row.key}-kind`}
                  label="When"
                  value={row.kind}
                  options={KINDS}
                  onChange={(kind) => change({ kind })}
                />
                <Field
                  id={`${row.key}-value`}
                  label={row.kind === "amount_usd" ? "Amount (USD)" : "Percentage of the budget"}
                  inputMode={row.kind === "amount_usd" ? "decimal" : "numeric"}
                  value={row.value}
                  onValue={(value) => change({ value })}
                  error={errors[`${at}/${row.kind}`]}
                  required
                />
              </>
            )}
          />
        </section>
      )}
    </>
  )
}
