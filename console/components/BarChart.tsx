import { formatUsd, micros, usdOfMicros } from "../format.js"

export interface Series {
  /** What the series is (a repository's or user's id, a model); the legend shows `label`. */
  readonly key: string
  readonly label: string
  /** One amount per label, the API's decimal strings; null where the series has nothing. */
  readonly values: ReadonlyArray<string | null>
}

/** Distinct at a glance and each above 3:1 against white (WCAG's contrast for graphics). */
const PALETTE = ["#0b57b0", "#b3261e", "#1e7d32", "#8a4baf", "#a15c00", "#00707a", "#5c6670", "#c2185b"]
export const colourOf = (index: number) => PALETTE[index % PALETTE.length] ?? "#0b57b0"

/** Each bar's width in the drawing's own units, and the room between bars. */
const BAR = 8
const STEP = 10

/**
 * A stacked bar chart drawn as SVG, one bar per label (day), one colour per series. Heights are
 * the amounts in micro-dollars, whole numbers from the decimal strings (`micros`), in a drawing
 * as tall as the largest day (`viewBox`), which the browser scales to the box: no amount is ever
 * a binary number, and every figure a person reads (a bar's tooltip, the table) is the string.
 * A table of the same data is kept for screen readers (the drawing is one image to them).
 */
export const BarChart = (
  { title, labels, series }: {
    readonly title: string
    readonly labels: ReadonlyArray<string>
    readonly series: ReadonlyArray<Series>
  }
) => {
  const totals = labels.map((_, day) => series.reduce((sum, one) => sum + micros(one.values[day] ?? "0"), 0n))
  const top = totals.reduce((max, total) => (total > max ? total : max), 0n)
  const height = top > 0n ? top : 1n
  const bars = labels.map((label, day) => {
    let base = height
    return (
      <g key={label}>
        {series.map((one, index) => {
          const value = one.values[day]
          const size = value === null || value === undefined ? 0n : micros(value)
          if (size <= 0n) return null
          base -= size
          return (
            <rect
              key={one.key}
              x={String(day * STEP + (STEP - BAR) / 2)}
              y={base.toString()}
              width={String(BAR)}
              height={size.toString()}
              fill={colourOf(index)}
            >
              <title>{`${label}, ${one.label}: ${formatUsd(value ?? "0")}`}</title>
            </rect>
          )
        })}
      </g>
    )
  })
  return (
    <figure class="chart-figure">
      <figcaption>{title}</figcaption>
      <div class="chart">
        <p class="chart-top" aria-hidden="true">{formatUsd(usdOfMicros(top))}</p>
        <svg
          class="chart-bars"
          viewBox={`0 0 ${labels.length * STEP} ${height.toString()}`}
          preserveAspectRatio="none"
          aria-hidden="true"
          focusable="false"
        >
          {bars}
        </svg>
        <p class="chart-days" aria-hidden="true">
          <span>{labels[0] ?? ""}</span>
          <span>{labels[labels.length - 1] ?? ""}</span>
        </p>
      </div>
      <ul class="legend" aria-hidden="true">
        {series.map((one, index) => (
          <li key={one.key}>
            <svg class="swatch" viewBox="0 0 1 1" focusable="false">
              <rect width="1" height="1" fill={colourOf(index)} />
            </svg>
            {one.label}
          </li>
        ))}
      </ul>
      <table class="chart-data visually-hidden">
        <caption>{title}</caption>
        <thead>
          <tr>
            <th scope="col">Day</th>
            {series.map((one) => <th key={one.key} scope="col" data-key={one.key}>{one.label}</th>)}
          </tr>
        </thead>
        <tbody>
          {labels.map((label, row) => (
            <tr key={label}>
              <th scope="row">{label}</th>
              {series.map((one) => <td key={one.key}>{one.values[row] ?? ""}</td>)}
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  )
}
