import type { SpendByDay } from "@account-api/client/web"
import { useMemo } from "preact/hooks"
import { shortId } from "../format.js"
import { BarChart, type Series } from "./BarChart.js"

/** Spending attributed to no repository or user, or with no model or such label (a group whose key is null). */
export const UNATTRIBUTED = "unattributed"

/**
 * A by-day report (the client's `getSpendByDay`) as a stacked bar per day, one series per
 * repository, user, model or label value; `ids` shortens the series' names (repository and user ids).
 */
export const SpendChart = (
  { ids = true, report, title }: { readonly title: string; readonly report: SpendByDay; readonly ids?: boolean }
) => {
  const { labels, series } = useMemo(() => {
    const keys = [
      ...new Set(report.days.flatMap((day) => day.groups.map((group) => group.key ?? UNATTRIBUTED)))
    ]
    const series: ReadonlyArray<Series> = keys.map((key) => ({
      key,
      label: key === UNATTRIBUTED ? (ids ? "Unattributed" : "None") : ids ? shortId(key) : key,
      values: report.days.map((day) =>
        day.groups.find((group) => (group.key ?? UNATTRIBUTED) === key)?.spent_usd ?? null
      )
    }))
    return { labels: report.days.map((day) => day.day), series }
  }, [report, ids])
  return <BarChart title={title} labels={labels} series={series} />
}
