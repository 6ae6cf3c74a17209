import type { Stat } from "./stats.js"
import type { Row } from "./suite.js"

const number = (value: number, digits: number): string =>
  value.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

/** `median (min–max)`, the way every figure is shown. */
export const formatStat = (stat: Stat, digits: number): string =>
  `${number(stat.median, digits)} (${number(stat.min, digits)}–${number(stat.max, digits)})`

const allColumns: ReadonlyArray<
  {
    readonly title: string
    readonly cell: (row: Row) => string
    readonly right?: boolean
    /** Left out of a table none of whose rows has it (a run without the settlement suite). */
    readonly optional?: boolean
  }
> = [
  { title: "suite", cell: (row) => row.suite },
  { title: "request", cell: (row) => row.request },
  { title: "server", cell: (row) => row.server },
  { title: "conns", cell: (row) => String(row.connections), right: true },
  { title: "req/s", cell: (row) => formatStat(row.rps, 0), right: true },
  { title: "p50 ms", cell: (row) => formatStat(row.p50_ms, 1), right: true },
  { title: "p99 ms", cell: (row) => formatStat(row.p99_ms, 1), right: true },
  {
    title: "CPU µs/req",
    cell: (row) => (row.cpu_us_per_request === undefined ? "" : formatStat(row.cpu_us_per_request, 0)),
    right: true
  },
  {
    title: "webhooks CPU µs/delivery",
    cell: (row) =>
      row.webhooks_cpu_us_per_delivery === undefined ? "" : formatStat(row.webhooks_cpu_us_per_delivery, 0),
    right: true,
    optional: true
  },
  {
    title: "postgres CPU µs/req",
    cell: (row) => row.postgres_cpu_us_per_request === undefined ? "" : formatStat(row.postgres_cpu_us_per_request, 0),
    right: true,
    optional: true
  },
  {
    title: "rows / index entries per job",
    cell: (row) =>
      row.rows_written_per_job === undefined || row.index_entries_per_job === undefined
        ? ""
        : `${number(row.rows_written_per_job.median, 1)} / ${number(row.index_entries_per_job.median, 1)}`,
    right: true,
    optional: true
  },
  {
    title: "planning share",
    cell: (row) => (row.planning_share === undefined ? "" : formatStat(row.planning_share, 3)),
    right: true,
    optional: true
  },
  {
    title: "re-reads/job",
    cell: (row) => (row.wallet_rereads_per_job === undefined ? "" : formatStat(row.wallet_rereads_per_job, 3)),
    right: true,
    optional: true
  },
  { title: "req/s ×ref", cell: (row) => (row.vs === undefined ? "" : formatStat(row.vs.rps, 2)), right: true },
  { title: "p99 ×ref", cell: (row) => (row.vs === undefined ? "" : formatStat(row.vs.p99, 2)), right: true }
]

/** One plain-text table (also valid Markdown), every figure as median (min–max) over the rounds. */
export const renderTable = (rows: ReadonlyArray<Row>): string => {
  const columns = allColumns.filter((column) => column.optional !== true || rows.some((row) => column.cell(row) !== ""))
  const cells = rows.map((row) => columns.map((column) => column.cell(row)))
  const widths = columns.map((column, index) =>
    Math.max(column.title.length, ...cells.map((line) => (line[index] ?? "").length))
  )
  const line = (values: ReadonlyArray<string>) =>
    "| " + values.map((value, index) => {
      const width = widths[index] ?? 0
      return columns[index]?.right === true ? value.padStart(width) : value.padEnd(width)
    }).join(" | ") + " |"
  const rule = "|" +
    widths.map((width, index) => (columns[index]?.right === true ? "-".repeat(width + 1) + ":" : "-".repeat(width + 2)))
      .join("|") +
    "|"
  return [line(columns.map((column) => column.title)), rule, ...cells.map(line)].join("\n")
}

/** The ratios, one a line, in the order they were measured. */
export const renderRatios = (ratios: Readonly<Record<string, number>>): string =>
  Object.entries(ratios).map(([name, value]) => `${name}: ${number(value, 3)}`).join("\n")
