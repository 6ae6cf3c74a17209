import {
  type AccountApiClient,
  LIMIT_PERIODS,
  LIMIT_SCOPES,
  type LimitPeriod,
  type LimitScope
} from "@account-api/client/web"
import { ConflictPanel } from "../components/ConflictPanel.js"
import { type Column, DataTable } from "../components/DataTable.js"
import { Field, SelectField } from "../components/Field.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { formatTime, shortId } from "../format.js"
import { useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type SavedLimit = Limits["limits"][number]

/** A row of the form: `key` keeps a row's inputs its own while rows are added and removed. */
interface LimitRow {
  readonly key: string
  readonly scope: LimitScope
  readonly scope_id: string
  readonly period: LimitPeriod
  readonly amount_usd: string
}

let newRows = 0
const newRow = (): LimitRow => ({
  key: `new-${++newRows}`,
  scope: "account",
  scope_id: "",
  period: "month",
  amount_usd: ""
})

const rowOf = (limit: SavedLimit): LimitRow => ({
  key: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id ?? "",
  period: limit.period,
  amount_usd: limit.amount_usd
})

const scopeText = (limit: { readonly scope: string; readonly scope_id: string | null }) =>
  limit.scope_id === null || limit.scope_id === "" ? limit.scope : `${limit.scope} ${shortId(limit.scope_id)}`

const LimitList = ({ limits }: { readonly limits: ReadonlyArray<Omit<LimitRow, "key"> | SavedLimit> }) => (
  <ul>
    {limits.length === 0 ? <li>No limits</li> : limits.map((limit, index) => (
      <li key={index}>
        {scopeText({ scope: limit.scope, scope_id: limit.scope_id })}, {limit.period}:{" "}
        <Money value={limit.amount_usd} />
      </li>
    ))}
  </ul>
)

const usageColumns: ReadonlyArray<Column<SavedLimit>> = [
  { header: "Scope", cell: (limit) => <span title={limit.scope_id ?? undefined}>{scopeText(limit)}</span> },
  { header: "Period", cell: (limit) => limit.period },
  { header: "Used", cell: (limit) => <Money value={limit.used_usd} />, numeric: true },
  { header: "Limit", cell: (limit) => <Money value={limit.amount_usd} />, numeric: true },
  {
    header: "Period ends",
    cell: (limit) => limit.period_end === null ? "When the session ends" : formatTime(limit.period_end)
  }
]

/**
 * The spend limits (D16): every member sees each with its use in the current period and when
 * that ends; an administrator edits the whole list (`PUT /developer/account/limits`, from the
 * version read), a 422 shown at the row and field it names, a 409 as components/ConflictPanel.tsx.
 */
export const Limits = () => {
  const signedIn = useSignedIn()
  const limits = useVersioned({
    load: (api) => api.getLimits(),
    toDraft: (record): ReadonlyArray<LimitRow> => record.limits.map(rowOf),
    save: (api, rows, expected_version) =>
      api.replaceLimits({
        expected_version,
        limits: rows.map((row) => ({
          scope: row.scope,
          scope_id: row.scope_id === "" ? null : row.scope_id,
          period: row.period,
          amount_usd: row.amount_usd
        }))
      })
  })
  const { base, draft, errors } = limits
  const change = (key: string, patch: Partial<Omit<LimitRow, "key">>) => {
    if (draft !== undefined) limits.setDraft(draft.map((row) => row.key === key ? { ...row, ...patch } : row))
  }

  return (
    <>
      <h1>Limits</h1>
      <ProblemBanner
        problem={limits.loaded.problem}
        retryInSeconds={limits.loaded.retryInSeconds}
        onRetry={limits.loaded.reload}
      />
      {base !== undefined && (
        <section class="card" aria-labelledby="limits-use-title">
          <h2 id="limits-use-title">Use in the current period</h2>
          <DataTable
            caption={`Version ${base.version}`}
            columns={usageColumns}
            rows={base.limits}
            rowKey={(limit) => limit.id}
            empty="No limits: only the wallet's budget holds sessions back."
          />
        </section>
      )}
      {signedIn.isAdmin && draft !== undefined && (
        <section class="card" aria-labelledby="limits-form-title">
          <h2 id="limits-form-title">Edit the limits</h2>
          <ProblemBanner problem={limits.problem} onRetry={() => void limits.save()} />
          {errors["limits"] !== undefined && <p class="field-error">{errors["limits"]}</p>}
          {limits.conflict !== undefined && (
            <ConflictPanel
              detail={limits.conflict.detail}
              current={<LimitList limits={limits.conflict.current.limits} />}
              mine={<LimitList limits={draft} />}
              onApplyMine={() => void limits.applyMine()}
              onKeepCurrent={limits.keepCurrent}
            />
          )}
          <form
            class="rows"
            onSubmit={(event) => {
              event.preventDefault()
              void limits.save()
            }}
          >
            {draft.map((row, index) => {
              const at = `limits/${index}`
              return (
                <fieldset class="row" key={row.key}>
                  <legend>Limit {index + 1}</legend>
                  {errors[at] !== undefined && <p class="field-error">{errors[at]}</p>}
                  <SelectField
                    id={`limit-${row.key}-scope`}
                    label="Scope"
                    value={row.scope}
                    options={LIMIT_SCOPES.map((scope) => ({ value: scope, label: scope }))}
                    onChange={(scope) => change(row.key, { scope })}
                    error={errors[`${at}/scope`]}
                  />
                  <Field
                    id={`limit-${row.key}-scope-id`}
                    label="Repository or user id"
                    hint="For a repository or user limit; empty for the account or each session"
                    value={row.scope_id}
                    onValue={(scope_id) => change(row.key, { scope_id })}
                    error={errors[`${at}/scope_id`]}
                  />
                  <SelectField
                    id={`limit-${row.key}-period`}
                    label="Period"
                    value={row.period}
                    options={LIMIT_PERIODS.map((period) => ({ value: period, label: period }))}
                    onChange={(period) => change(row.key, { period })}
                    error={errors[`${at}/period`]}
                  />
                  <Field
                    id={`limit-${row.key}-amount`}
                    label="Amount (USD)"
                    inputMode="decimal"
                    value={row.amount_usd}
                    onValue={(amount_usd) => change(row.key, { amount_usd })}
                    error={errors[`${at}/amount_usd`]}
                    required
                  />
                  <div class="actions">
                    <button
                      type="button"
                      class="secondary"
                      onClick={() => limits.setDraft(draft.filter((other) => other.key !== row.key))}
                    >
                      Remove limit {index + 1}
                    </button>
                  </div>
                </fieldset>
              )
            })}
            <div class="actions">
              <button
                type="button"
                class="secondary"
                onClick={() => limits.setDraft([...draft, newRow()])}
              >
                Add a limit
              </button>
              <button type="submit" disabled={limits.saving || limits.conflict !== undefined}>Save the limits</button>
            </div>
            <p role="status">{limits.saved === undefined ? "" : `Limits saved (version ${limits.saved.version}).`}</p>
          </form>
        </section>
      )}
    </>
  )
}
