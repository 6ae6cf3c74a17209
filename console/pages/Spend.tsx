import type { AccountApiClient } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { BarChart } from "../components/BarChart.js"
import { DataTable } from "../components/DataTable.js"
import { Field, SelectField } from "../components/Field.js"
import { LedgerCsv } from "../components/LedgerCsv.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { SpendChart, UNATTRIBUTED } from "../components/SpendChart.js"
import { Named } from "../directory.js"
import { formatDay } from "../format.js"
import { fieldErrors, useLoad } from "../session.js"

type Report = Awaited<ReturnType<AccountApiClient["getSpend"]>>

type Grouping = "repository" | "user" | "model" | "label" | "day" | "month"

const GROUPINGS: ReadonlyArray<{ readonly value: Grouping; readonly label: string }> = [
  { value: "repository", label: "Repository" },
  { value: "user", label: "User" },
  { value: "model", label: "Model" },
  { value: "label", label: "Label" },
  { value: "day", label: "Day" },
  { value: "month", label: "Month" }
]

/** Groupings other than time split each day of the chart. */
const isSplit = (grouping: Grouping) => grouping !== "day" && grouping !== "month"

interface Query {
  readonly grouping: Grouping
  /** The label's key, for the label grouping (D19's `label:<key>`). */
  readonly label: string
  readonly from: string
  readonly to: string
}

const groupByOf = (query: Query) => query.grouping === "label" ? `label:${query.label}` : query.grouping

/**
 * The spend report (D16, D19) with its grouping and window as controls: a stacked bar per day
 * split by repository, user, model or a label (or a bar per day or month), and the report's own
 * table, whose totals are the report's. The ledger's CSV for the same window.
 */
export const Spend = () => {
  const [draft, setDraft] = useState<Query>({ grouping: "repository", label: "", from: "", to: "" })
  const [query, setQuery] = useState<Query>(draft)
  const span = {
    ...(query.from === "" ? {} : { from: query.from }),
    ...(query.to === "" ? {} : { to: query.to })
  }
  const report = useLoad((api) => api.getSpend({ group_by: groupByOf(query), ...span }), [query])
  const byDay = useLoad(
    (api) =>
      isSplit(query.grouping) ? api.getSpendByDay({ split_by: groupByOf(query), ...span }) : Promise.resolve(undefined),
    [query]
  )
  const errors = fieldErrors(report.problem)

  return (
    <>
      <h1>Spend</h1>
      <form
        class="controls"
        aria-label="Spend report"
        onSubmit={(event) => {
          event.preventDefault()
          setQuery(draft)
        }}
      >
        <SelectField
          id="group_by"
          label="Group by"
          value={draft.grouping}
          options={GROUPINGS}
          onChange={(grouping) => setDraft({ ...draft, grouping })}
          error={errors["query/group_by"]}
        />
        {draft.grouping === "label" && (
          <Field
            id="label"
            label="Label key"
            value={draft.label}
            onValue={(label) => setDraft({ ...draft, label })}
            hint="e.g. team"
          />
        )}
        <Field
          id="from"
          label="From (UTC day)"
          type="date"
          value={draft.from}
          onValue={(from) => setDraft({ ...draft, from })}
          error={errors["query/from"]}
          hint="Empty: this month"
        />
        <Field
          id="to"
          label="To (excluded)"
          type="date"
          value={draft.to}
          onValue={(to) => setDraft({ ...draft, to })}
          error={errors["query/to"]}
        />
        <button type="submit">Show</button>
      </form>
      <ProblemBanner problem={report.problem} retryInSeconds={report.retryInSeconds} onRetry={report.reload} />
      {report.data !== undefined && (
        <div class="grid">
          <section class="card" aria-labelledby="spend-chart-title">
            <h2 id="spend-chart-title">
              {formatDay(report.data.from)} to {formatDay(report.data.to)} (excluded)
            </h2>
            <ProblemBanner problem={byDay.problem} retryInSeconds={byDay.retryInSeconds} onRetry={byDay.reload} />
            {byDay.data !== undefined
              ? (
                <SpendChart
                  title={`Spent per day, by ${byDay.data.split_by} (UTC)`}
                  report={byDay.data}
                />
              )
              : !isSplit(query.grouping) && <TimeChart report={report.data} />}
          </section>
          <section class="card" aria-labelledby="spend-table-title">
            <h2 id="spend-table-title">The report</h2>
            <ReportTable report={report.data} grouping={query.grouping} />
            <LedgerCsv from={report.data.from} to={report.data.to} label="Download this window's ledger as CSV" />
          </section>
        </div>
      )}
    </>
  )
}

/** A report grouped by day or month: one bar per group. */
const TimeChart = ({ report }: { readonly report: Report }) => (
  <BarChart
    title={`Spent per ${report.group_by} (UTC)`}
    labels={report.groups.map((group) => group.key ?? UNATTRIBUTED)}
    series={[{ key: "spent", label: "Spent", values: report.groups.map((group) => group.spent_usd) }]}
  />
)

const HEADERS: Record<Grouping, string> = {
  repository: "Repository",
  user: "User",
  model: "Model",
  label: "Label",
  day: "Period",
  month: "Period"
}

const ReportTable = ({ report, grouping }: { readonly report: Report; readonly grouping: Grouping }) => (
  <DataTable
    caption={`Spend by ${report.group_by}`}
    rows={[...report.groups.map((group) => ({ ...group, total: false })), { ...report.total, key: null, total: true }]}
    rowKey={(row) => row.total ? "total" : row.key ?? UNATTRIBUTED}
    empty="Nothing was spent in this window."
    columns={[
      {
        header: HEADERS[grouping],
        cell: (row) =>
          row.total
            ? <strong>Total</strong>
            : (
              <span data-key={row.key ?? UNATTRIBUTED}>
                {grouping === "repository" || grouping === "user"
                  ? <Named kind={grouping} id={row.key ?? null} />
                  : row.key ?? "None"}
              </span>
            )
      },
      { header: "Spent", numeric: true, cell: (row) => <Money value={row.spent_usd} /> },
      { header: "Beyond holds", numeric: true, cell: (row) => <Money value={row.unfunded_usd} /> },
      { header: "Sessions", numeric: true, cell: (row) => String(row.sessions) }
    ]}
  />
)
