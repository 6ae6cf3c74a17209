import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartConfiguration,
  Legend,
  LinearScale,
  Tooltip
} from "chart.js"
import { useEffect, useRef } from "preact/hooks"
import { formatUsd } from "../format.js"

// Only what a bar chart with a legend and tooltips draws, so the rest of Chart.js is left out of the bundle.
Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend)

export interface Series {
  /** What the series is (a repository's or user's id); the legend shows `label`. */
  readonly key: string
  readonly label: string
  /** One amount per label, the API's decimal strings; null where the series has nothing. */
  readonly values: ReadonlyArray<string | null>
}

/** Distinct at a glance and each above 3:1 against white (WCAG's contrast for graphics). */
const PALETTE = ["#0b57b0", "#b3261e", "#1e7d32", "#8a4baf", "#a15c00", "#00707a", "#5c6670", "#c2185b"]

/**
 * A stacked bar chart (Chart.js, on a canvas). The amounts go to Chart.js as the strings the API
 * sent: the library turns them into bar heights, and every figure a person reads (tooltip,
 * table) is the string itself. The canvas holds the chart's data as a table, which screen
 * readers read instead of the picture; the visible table beside a chart is the page's.
 * The series' labels are the legend's.
 */
export const BarChart = (
  { title, labels, series }: {
    readonly title: string
    readonly labels: ReadonlyArray<string>
    readonly series: ReadonlyArray<Series>
  }
) => {
  const canvas = useRef<HTMLCanvasElement>(null)
  useEffect(() => {
    if (canvas.current === null) return
    const config: ChartConfiguration<"bar", Array<string | null>, string> = {
      type: "bar",
      data: {
        labels: [...labels],
        datasets: series.map((one, index) => ({
          label: one.label,
          data: [...one.values],
          backgroundColor: PALETTE[index % PALETTE.length] ?? "#0b57b0"
        }))
      },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        scales: {
          x: { stacked: true },
          y: { stacked: true, beginAtZero: true, ticks: { callback: (value) => `$${value}` } }
        },
        plugins: {
          legend: { position: "bottom" },
          tooltip: {
            callbacks: {
              label: (item) => `${item.dataset.label ?? ""}: ${formatUsd(String(item.raw))}`
            }
          }
        }
      }
    }
    const chart = new Chart(canvas.current, config)
    return () => chart.destroy()
  }, [labels, series])

  return (
    <figure class="chart-figure">
      <figcaption>{title}</figcaption>
      <div class="chart">
        <canvas ref={canvas}>
          <table class="chart-data">
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
        </canvas>
      </div>
    </figure>
  )
}
