import type { SpendByDay } from "@account-api/client/web"
import { useMemo } from "preact/hooks"
import { repositoryName, useDirectory, userName } from "../directory.js"
import { UNATTRIBUTED_LABEL } from "../format.js"
import { BarChart, type Series } from "./BarChart.js"

/** Spending attributed to no repository or user, or with no model or such label (a group whose key is null). */
export const UNATTRIBUTED = "unattributed"

/**
 * A by-day report (the client's `getSpendByDay`) as a stacked bar per day, one series per
 * repository, user, model or label value: repositories and users by name (D23), models and label
 * values in full; none is "Unattributed" for a repository or user, "None" for a model or label.
 */
export const SpendChart = ({ report, title }: { readonly title: string; readonly report: SpendByDay }) => {
  const directory = useDirectory()
  const { labels, series } = useMemo(() => {
    const named = report.split_by === "repository" || report.split_by === "user"
    const nameOf = (key: string) =>
      key === UNATTRIBUTED
        ? named ? UNATTRIBUTED_LABEL : "None"
        : report.split_by === "repository"
        ? repositoryName(directory, key)
        : report.split_by === "user"
        ? userName(directory, key)
        : key
    const keys = [
      ...new Set(report.days.flatMap((day) => day.groups.map((group) => group.key ?? UNATTRIBUTED)))
    ]
    const series: ReadonlyArray<Series> = keys.map((key) => ({
      key,
      label: nameOf(key),
      values: report.days.map((day) =>
        day.groups.find((group) => (group.key ?? UNATTRIBUTED) === key)?.spent_usd ?? null
      )
    }))
    return { labels: report.days.map((day) => day.day), series }
  }, [report, directory.repositories, directory.members])
  return <BarChart title={title} labels={labels} series={series} />
}
