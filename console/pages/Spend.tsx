import type { AccountApiClient, SpendSplit } from "@account-api/client/web"
import { useState } from "preact/hooks"
import { BarChart } from "../components/BarChart.js"
import { DataTable } from "../components/DataTable.js"
import { Field, SelectField } from "../components/Field.js"
import { LedgerCsv } from "../components/LedgerCsv.js"
import { Money } from "../components/Money.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { SpendChart, UNATTRIBUTED } from "../components/SpendChart.js"
import { formatDay } from "../format.js"
import { fieldErrors, useLoad } from "../session.js"

type GroupBy = Parameters<AccountApiClient["getSpend"]>[0]["group_by"]
type Report = Awaited<ReturnType<AccountApiClient["getSpend"]>>

const GROUPINGS: ReadonlyArray<{ readonly value: GroupBy; readonly label: string }> = [
  { value: "repository", label: "Repository" },
  { value: "user", label: "User" },
  { value: "day", label: "Day" },
  { value: "month", label: "Month" }
]

const isSplit = (groupBy: GroupBy): groupBy is SpendSplit => groupBy === "repository" || groupBy === "user"

interface Query {
  readonly group_by: GroupBy
  readonly from: string
  readonly to: string
}

/**
 * The spend report (D16) with its grouping and window as controls: a stacked bar per day split
 * by repository or user (or a bar per day or month), and the report's own table, whose totals are
 * the report's. The ledger's CSV for the same window.
 */
export const Spend = () => {
  const [draft, setDraft] = useState<Query>({ group_by: "repository", from: "", to: "" })
  const [query, setQuery] = useState<Query>(draft)
  const span = {
    ...(query.from === "" ? {} : { from: query.from }),
    ...(query.to === "" ? {} : { to: query.to })
  }
  const report = useLoad((api) => api.getSpend({ group_by: query.group_by, ...span }), [query])
  const byDay = useLoad(
    (api) =>
      isSplit(query.group_by) ? api.getSpendByDay({ split_by: query.group_by, ...span }) : Promise.resolve(undefined),
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
          value={draft.group_by}
          options={GROUPINGS}
          onChange={(group_by) => setDraft({ ...draft, group_by })}
          error={errors["query/group_by"]}
        />
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
              ? <SpendChart title={`Spent per day, by ${byDay.data.split_by} (UTC)`} report={byDay.data} />
              : !isSplit(report.data.group_by) && <TimeChart report={report.data} />}
          </section>
          <section class="card" aria-labelledby="spend-table-title">
            <h2 id="spend-table-title">The report</h2>
            <ReportTable report={report.data} />
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

const ReportTable = ({ report }: { readonly report: Report }) => (
  <DataTable
    caption={`Spend by ${report.group_by}`}
    rows={[...report.groups.map((group) => ({ ...group, total: false })), { ...report.total, key: null, total: true }]}
    rowKey={(row) => row.total ? "total" : row.key ?? UNATTRIBUTED}
    empty="Nothing was spent in this window."
    columns={[
      {
        header: report.group_by === "repository" ? "Repository" : report.group_by === "user" ? "User" : "Period",
        cell: (row) =>
          row.total
            ? <strong>Total</strong>
            : <span data-key={row.key ?? UNATTRIBUTED}>{row.key ?? "Unattributed"}</span>
      },
      { header: "Spent", numeric: true, cell: (row) => <Money value={row.spent_usd} /> },
      { header: "Beyond holds", numeric: true, cell: (row) => <Money value={row.unfunded_usd} /> },
      { header: "Sessions", numeric: true, cell: (row) => String(row.sessions) }
    ]}
  />
)
