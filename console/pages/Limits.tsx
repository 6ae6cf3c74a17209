import {
  type AccountApiClient,
  LIMIT_PERIODS,
  LIMIT_SCOPES,
  type LimitPeriod,
  type LimitScope
} from "@account-api/client/web"
import { type Column, DataTable } from "../components/DataTable.js"
import { Field, SelectField } from "../components/Field.js"
import { ScopeName } from "../components/LimitsList.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { VersionedListForm } from "../components/VersionedListForm.js"
import { type Directory, useDirectory } from "../directory.js"
import { amountInput, formatTime, shortId, wholeNumber } from "../format.js"
import { useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type SavedLimit = Limits["limits"][number]

/**
 * A row of the form, every input as typed: `key` keeps a row's inputs its own while rows are
 * added and removed. Warnings are typed as `50, 80`; a raise is its amount and its end.
 */
interface LimitRow {
  readonly key: string
  readonly scope: LimitScope
  readonly scope_id: string
  readonly period: LimitPeriod
  readonly amount_usd: string
  readonly max_open_sessions: string
  readonly warn_at_percent: string
  readonly raise_amount_usd: string
  readonly raise_until: string
}

let newRows = 0
const newRow = (): LimitRow => ({
  key: `new-${++newRows}`,
  scope: "account",
  scope_id: "",
  period: "month",
  amount_usd: "",
  max_open_sessions: "",
  warn_at_percent: "",
  raise_amount_usd: "",
  raise_until: ""
})

/** Whether a limit's raise is what it enforces now; one that ended is left out of the form (a PUT refuses it). */
const raised = (limit: SavedLimit) => limit.raise !== null && limit.effective_amount_usd === limit.raise.amount_usd

const rowOf = (limit: SavedLimit): LimitRow => ({
  key: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id ?? "",
  period: limit.period,
  amount_usd: limit.amount_usd === null ? "" : amountInput(limit.amount_usd),
  max_open_sessions: limit.max_open_sessions === null ? "" : String(limit.max_open_sessions),
  warn_at_percent: limit.warn_at_percent.join(", "),
  raise_amount_usd: raised(limit) && limit.raise !== null ? amountInput(limit.raise.amount_usd) : "",
  raise_until: raised(limit) ? limit.raise?.until ?? "" : ""
})

/** A row as the PUT takes it: an amount, warnings and a raise for a spend limit, a bound for a concurrent one. */
const limitOf = (row: LimitRow) => ({
  scope: row.scope,
  scope_id: row.scope_id === "" ? null : row.scope_id,
  period: row.period,
  ...(row.period === "concurrent"
    ? { max_open_sessions: wholeNumber(row.max_open_sessions.trim(), 6) }
    : {
      amount_usd: row.amount_usd,
      warn_at_percent: row.warn_at_percent.trim() === ""
        ? []
        : row.warn_at_percent.split(",").map((part) => wholeNumber(part.trim())),
      ...(row.raise_amount_usd === "" && row.raise_until === ""
        ? {}
        : { raise: { amount_usd: row.raise_amount_usd, until: row.raise_until } })
    })
})

/** What a saved limit or a row enforces, in a few words. */
const boundOf = (limit: { readonly amount_usd: string | null; readonly max_open_sessions: string | number | null }) =>
  limit.amount_usd === null || limit.amount_usd === ""
    ? `${limit.max_open_sessions ?? ""} sessions at once`
    : <Money value={limit.amount_usd} />

const LimitList = ({ limits }: { readonly limits: ReadonlyArray<Omit<LimitRow, "key"> | SavedLimit> }) => (
  <ul>
    {limits.length === 0 ? <li>No limits</li> : limits.map((limit, index) => (
      <li key={index}>
        <ScopeName limit={limit} />, {limit.period}: {boundOf(limit)}
      </li>
    ))}
  </ul>
)

const usageColumns: ReadonlyArray<Column<SavedLimit>> = [
  { header: "Scope", cell: (limit) => <ScopeName limit={limit} /> },
  { header: "Period", cell: (limit) => limit.period },
  {
    header: "Used",
    cell: (limit) => limit.used_usd === null ? `${limit.open_sessions ?? 0} open` : <Money value={limit.used_usd} />,
    numeric: true
  },
  {
    header: "Limit",
    cell: (limit) =>
      limit.effective_amount_usd === null
        ? boundOf(limit)
        : (
          <>
            <Money value={limit.effective_amount_usd} />
            {raised(limit) && ` until ${formatTime(limit.raise?.until ?? "")}`}
          </>
        ),
    numeric: true
  },
  {
    header: "Period ends",
    cell: (limit) =>
      limit.period === "concurrent"
        ? "Counts sessions open now"
        : limit.period_end === null
        ? "When the session ends"
        : formatTime(limit.period_end)
  }
]

/** The repositories or users a limit may name, by name (D23); an id the directory does not know is kept, shortened. */
const scopeChoices = (directory: Directory, row: LimitRow) => {
  const known = row.scope === "repository"
    ? directory.repositories.map((repository) => ({ value: repository.id, label: repository.name }))
    : directory.members.map((member) => ({ value: member.id, label: member.name }))
  const kept = row.scope_id === "" || known.some((choice) => choice.value === row.scope_id)
    ? []
    : [{ value: row.scope_id, label: shortId(row.scope_id) }]
  return [{ value: "", label: `Choose a ${row.scope}` }, ...kept, ...known]
}

const RowSummary = ({ row }: { readonly row: LimitRow }) => (
  <>
    <ScopeName limit={{ scope: row.scope, scope_id: row.scope_id === "" ? null : row.scope_id }} />
    {row.period === "concurrent"
      ? `: ${row.max_open_sessions === "" ? "?" : row.max_open_sessions} sessions at once`
      : (
        <>
          , per {row.period}: {row.amount_usd === "" ? "no amount yet" : <Money value={row.amount_usd} />}
          {row.warn_at_percent === "" ? "" : `, warns at ${row.warn_at_percent}%`}
          {row.raise_amount_usd === "" ? "" : (
            <>
              , raised to <Money value={row.raise_amount_usd} />
            </>
          )}
        </>
      )}
  </>
)

/**
 * The limits (D16, D19): every member sees each with its use now (money in the current period, or
 * sessions open) and when that period ends; an administrator edits the list (`PUT
 * /developer/account/limits`, from the version read) as components/VersionedListForm.tsx does:
 * a line a limit, an editor per limit, the repository or user picked by name from the directory.
 */
export const Limits = () => {
  const signedIn = useSignedIn()
  const directory = useDirectory()
  const limits = useVersioned({
    load: (api) => api.getLimits(),
    toDraft: (record): ReadonlyArray<LimitRow> => record.limits.map(rowOf),
    save: (api, rows, expected_version) => api.replaceLimits({ expected_version, limits: rows.map(limitOf) })
  })
  const { base, draft, errors } = limits

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
          <VersionedListForm
            versioned={limits}
            noun="limit"
            pointer="limits"
            newRow={newRow}
            summary={(row) => <RowSummary row={row} />}
            currentList={(record) => <LimitList limits={record.limits} />}
            mineList={(rows) => <LimitList limits={rows} />}
            editor={(row, at, change) => (
              <>
                <SelectField
                  id={`limit-${row.key}-scope`}
                  label="Scope"
                  value={row.scope}
                  options={LIMIT_SCOPES.map((scope) => ({ value: scope, label: scope }))}
                  onChange={(scope) => change({ scope, scope_id: "" })}
                  error={errors[`${at}/scope`]}
                />
                {row.scope === "repository" || row.scope === "user"
                  ? (
                    <SelectField
                      id={`limit-${row.key}-scope-id`}
                      label={row.scope === "repository" ? "Repository" : "User"}
                      value={row.scope_id}
                      options={scopeChoices(directory, row)}
                      onChange={(scope_id) => change({ scope_id })}
                      error={errors[`${at}/scope_id`]}
                    />
                  )
                  : row.scope === "label" && (
                    <Field
                      id={`limit-${row.key}-scope-id`}
                      label="Label"
                      hint="As key=value, such as team=ads"
                      value={row.scope_id}
                      onValue={(scope_id) => change({ scope_id })}
                      error={errors[`${at}/scope_id`]}
                    />
                  )}
                <SelectField
                  id={`limit-${row.key}-period`}
                  label="Period"
                  value={row.period}
                  options={LIMIT_PERIODS.map((period) => ({ value: period, label: period }))}
                  onChange={(period) => change({ period })}
                  error={errors[`${at}/period`]}
                />
                {row.period === "concurrent"
                  ? (
                    <Field
                      id={`limit-${row.key}-max`}
                      label="Sessions open at once, at most"
                      inputMode="numeric"
                      value={row.max_open_sessions}
                      onValue={(max_open_sessions) => change({ max_open_sessions })}
                      error={errors[`${at}/max_open_sessions`] ?? errors[`${at}/amount_usd`]}
                      required
                    />
                  )
                  : (
                    <>
                      <Field
                        id={`limit-${row.key}-amount`}
                        label="Amount (USD)"
                        inputMode="decimal"
                        value={row.amount_usd}
                        onValue={(amount_usd) => change({ amount_usd })}
                        error={errors[`${at}/amount_usd`] ?? errors[`${at}/max_open_sessions`]}
                        required
                      />
                      <Field
                        id={`limit-${row.key}-warn`}
                        label="Warn at percent"
                        hint="Up to 5, ascending, such as 50, 80; empty for none"
                        value={row.warn_at_percent}
                        onValue={(warn_at_percent) => change({ warn_at_percent })}
                        error={errors[`${at}/warn_at_percent`]}
                      />
                      <Field
                        id={`limit-${row.key}-raise`}
                        label="Raise to (USD)"
                        hint="A temporary raise above the amount; empty for none"
                        inputMode="decimal"
                        value={row.raise_amount_usd}
                        onValue={(raise_amount_usd) => change({ raise_amount_usd })}
                        error={errors[`${at}/raise/amount_usd`] ?? errors[`${at}/raise`]}
                      />
                      <Field
                        id={`limit-${row.key}-until`}
                        label="Raise ends"
                        hint="Within 90 days, such as 2026-01-31T00:00:00Z"
                        value={row.raise_until}
                        onValue={(raise_until) => change({ raise_until })}
                        error={errors[`${at}/raise/until`]}
                      />
                    </>
                  )}
              </>
            )}
          />
        </section>
      )}
    </>
  )
}
