import {
  type AccountApiClient,
  LIMIT_PERIODS,
  LIMIT_SCOPES,
  type LimitPeriod,
  type LimitScope
} from "@account-api/client/web"
import { type Directory, useDirectory } from "../directory.js"
import { periodWords } from "../events.js"
import { amountInput, shortId, wholeNumber } from "../format.js"
import { Field, SelectField } from "./Field.js"
import { ScopeName } from "./LimitsList.js"
import { Money } from "./Money.js"

type Limits = Awaited<ReturnType<AccountApiClient["getLimits"]>>
type SavedLimit = Limits["limits"][number]

/**
 * A row of the limits form, every input as typed: `key` keeps a row's inputs its own while rows
 * are added and removed. Warnings are typed as `50, 80`; a raise is its amount and its end; a
 * rolling window its minutes (D22).
 */
export interface LimitRow {
  readonly key: string
  readonly scope: LimitScope
  readonly scope_id: string
  readonly period: LimitPeriod
  readonly window_minutes: string
  readonly amount_usd: string
  readonly max_open_sessions: string
  readonly warn_at_percent: string
  readonly raise_amount_usd: string
  readonly raise_until: string
}

let newRows = 0
export const newRow = (): LimitRow => ({
  key: `new-${++newRows}`,
  scope: "account",
  scope_id: "",
  period: "month",
  window_minutes: "",
  amount_usd: "",
  max_open_sessions: "",
  warn_at_percent: "",
  raise_amount_usd: "",
  raise_until: ""
})

/** Whether a limit's raise is what it enforces now; one that ended is left out of the form (a PUT refuses it). */
export const raised = (limit: Pick<SavedLimit, "raise" | "effective_amount_usd">) =>
  limit.raise !== null && limit.effective_amount_usd === limit.raise.amount_usd

export const rowOf = (limit: SavedLimit): LimitRow => ({
  key: limit.id,
  scope: limit.scope,
  scope_id: limit.scope_id ?? "",
  period: limit.period,
  window_minutes: limit.window_minutes === null ? "" : String(limit.window_minutes),
  amount_usd: limit.amount_usd === null ? "" : amountInput(limit.amount_usd),
  max_open_sessions: limit.max_open_sessions === null ? "" : String(limit.max_open_sessions),
  warn_at_percent: limit.warn_at_percent.join(", "),
  raise_amount_usd: raised(limit) && limit.raise !== null ? amountInput(limit.raise.amount_usd) : "",
  raise_until: raised(limit) ? limit.raise?.until ?? "" : ""
})

/**
 * A row as the PUT takes it: an amount, warnings and a raise for a spend limit (a rolling one
 * has its window and no warnings), a bound for a concurrent one.
 */
export const limitOf = (row: LimitRow) => ({
  scope: row.scope,
  scope_id: row.scope_id === "" ? null : row.scope_id,
  period: row.period,
  ...(row.period === "concurrent"
    ? { max_open_sessions: wholeNumber(row.max_open_sessions.trim(), 6) }
    : {
      amount_usd: row.amount_usd,
      ...(row.period === "rolling"
        ? { window_minutes: wholeNumber(row.window_minutes.trim(), 5) }
        : {
          warn_at_percent: row.warn_at_percent.trim() === ""
            ? []
            : row.warn_at_percent.split(",").map((part) => wholeNumber(part.trim()))
        }),
      ...(row.raise_amount_usd === "" && row.raise_until === ""
        ? {}
        : { raise: { amount_usd: row.raise_amount_usd, until: row.raise_until } })
    })
})

/** What a saved limit or a row enforces, in a few words. */
export const boundOf = (
  limit: { readonly amount_usd: string | null; readonly max_open_sessions: string | number | null }
) =>
  limit.amount_usd === null || limit.amount_usd === ""
    ? `${limit.max_open_sessions ?? ""} sessions at once`
    : <Money value={limit.amount_usd} />

/** A row's or a saved limit's period in the form's words: "day", "rolling 60 minutes". */
const periodOf = (limit: { readonly period: LimitPeriod; readonly window_minutes: string | number | null }) => {
  const minutes = typeof limit.window_minutes === "number" ? limit.window_minutes : wholeNumber(
    limit.window_minutes ?? "",
    5
  )
  return periodWords({ period: limit.period, window_minutes: isNaN(minutes) ? null : minutes })
}

export const LimitList = (
  { limits }: { readonly limits: ReadonlyArray<Omit<LimitRow, "key"> | SavedLimit> }
) => (
  <ul>
    {limits.length === 0 ? <li>No limits</li> : limits.map((limit, index) => (
      <li key={index}>
        <ScopeName limit={limit} />, {periodOf(limit)}: {boundOf(limit)}
      </li>
    ))}
  </ul>
)

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

export const RowSummary = ({ row }: { readonly row: LimitRow }) => (
  <>
    <ScopeName limit={{ scope: row.scope, scope_id: row.scope_id === "" ? null : row.scope_id }} />
    {row.period === "concurrent"
      ? `: ${row.max_open_sessions === "" ? "?" : row.max_open_sessions} sessions at once`
      : (
        <>
          {row.period === "rolling"
            ? `, over the last ${row.window_minutes === "" ? "?" : row.window_minutes} minutes: `
            : `, per ${row.period}: `}
          {row.amount_usd === "" ? "no amount yet" : <Money value={row.amount_usd} />}
          {row.warn_at_percent === "" || row.period === "rolling" ? "" : `, warns at ${row.warn_at_percent}%`}
          {row.raise_amount_usd === "" ? "" : (
            <>
              , raised to <Money value={row.raise_amount_usd} />
            </>
          )}
        </>
      )}
  </>
)

/** The scopes as the form offers them. */
const SCOPE_LABELS: Readonly<Record<LimitScope, string>> = {
  account: "the account",
  repository: "one repository",
  user: "one user",
  label: "one label's value",
  session: "each session",
  each_user: "each user",
  each_repository: "each repository",
  each_label: "each value of a label"
}

/**
 * One row's fields: the scope (with the repository or user picked by name, a label as key=value,
 * an each_label limit's key), the period (a rolling one's window in minutes), and the amount,
 * warnings and raise of a spend limit or the bound of a concurrent one. Each field shows the
 * service's 422 at its pointer (`at` is the row's, `limits/1`).
 */
export const LimitEditor = (
  { row, at, change, errors }: {
    readonly row: LimitRow
    readonly at: string
    readonly change: (patch: Partial<Omit<LimitRow, "key">>) => void
    readonly errors: Readonly<Record<string, string>>
  }
) => {
  const directory = useDirectory()
  return (
    <>
      <SelectField
        id={`limit-${row.key}-scope`}
        label="Scope"
        hint="Each user, each repository and each value of a label count every one of them on its own"
        value={row.scope}
        options={LIMIT_SCOPES.map((scope) => ({ value: scope, label: SCOPE_LABELS[scope] }))}
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
        : row.scope === "label"
        ? (
          <Field
            id={`limit-${row.key}-scope-id`}
            label="Label"
            hint="As key=value, such as team=ads"
            value={row.scope_id}
            onValue={(scope_id) => change({ scope_id })}
            error={errors[`${at}/scope_id`]}
          />
        )
        : row.scope === "each_label" && (
          <Field
            id={`limit-${row.key}-scope-id`}
            label="Label key"
            hint="Every value of this key is limited on its own, such as team"
            value={row.scope_id}
            onValue={(scope_id) => change({ scope_id })}
            error={errors[`${at}/scope_id`]}
          />
        )}
      <SelectField
        id={`limit-${row.key}-period`}
        label="Period"
        hint="Hours, days, weeks and months are the account's time zone's"
        value={row.period}
        options={LIMIT_PERIODS.map((period) => ({ value: period, label: period }))}
        onChange={(period) => change({ period })}
        error={errors[`${at}/period`]}
      />
      {row.period === "rolling" && (
        <Field
          id={`limit-${row.key}-window`}
          label="Window (minutes)"
          hint="The last 5 to 10080 minutes (a week), such as 60"
          inputMode="numeric"
          value={row.window_minutes}
          onValue={(window_minutes) => change({ window_minutes })}
          error={errors[`${at}/window_minutes`]}
          required
        />
      )}
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
            {row.period !== "rolling" && (
              <Field
                id={`limit-${row.key}-warn`}
                label="Warn at percent"
                hint="Up to 5, ascending, such as 50, 80; empty for none"
                value={row.warn_at_percent}
                onValue={(warn_at_percent) => change({ warn_at_percent })}
                error={errors[`${at}/warn_at_percent`]}
              />
            )}
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
  )
}
