import type { SpendByDay } from "@account-api/client/web"
import { useMemo } from "preact/hooks"
import { shortId } from "../format.js"
import { BarChart, type Series } from "./BarChart.js"

/** Spending attributed to no repository or user (a group whose key is null). */
export const UNATTRIBUTED = "unattributed"

/** A by-day report (the client's `getSpendByDay`) as a stacked bar per day, one series per repository or user. */
export const SpendChart = ({ title, report }: { readonly title: string; readonly report: SpendByDay }) => {
  const { labels, series } = useMemo(() => {
    const keys = [
      ...new Set(report.days.flatMap((day) => day.groups.map((group) => group.key ?? UNATTRIBUTED)))
    ]
    const series: ReadonlyArray<Series> = keys.map((key) => ({
      key,
      label: key === UNATTRIBUTED ? "Unattributed" : shortId(key),
      values: report.days.map((day) =>
        day.groups.find((group) => (group.key ?? UNATTRIBUTED) === key)?.spent_usd ?? null
      )
    }))
    return { labels: report.days.map((day) => day.day), series }
  }, [report])
  return <BarChart title={title} labels={labels} series={series} />
}
