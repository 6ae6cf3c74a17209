import type { Row, SuiteResult } from "./suite.js"

/**
 * What a suite has measured so far, kept as it is measured: a run stopped at its limit in the
 * middle of a suite reports every row and ratio kept here. A row kept under a key replaces the
 * one kept under it before, in its place: a row of the rounds so far is replaced by the row of
 * more rounds, and by the suite's final row.
 */
export class RowKeeper {
  private readonly rows = new Map<string, Row>()
  private readonly ratios = new Map<string, number>()

  row(key: string, row: Row): void {
    this.rows.set(key, row)
  }

  /** A ratio that could not be computed (no rounds to pair yet) is not kept. */
  ratio(name: string, value: number | undefined): void {
    if (value !== undefined && Number.isFinite(value)) this.ratios.set(name, value)
  }

  /** Keeps a whole result in place of what was kept: a suite that reports all it has each time. */
  all(result: SuiteResult): void {
    this.rows.clear()
    this.ratios.clear()
    result.rows.forEach((row, index) => this.row(String(index), row))
    for (const [name, value] of Object.entries(result.ratios)) this.ratio(name, value)
  }

  /**
   * Keeps a part's rows (each keyed by `part`, its server, request and connections, so the part's
   * row of a server replaces the one before it) and ratios beside what is kept.
   */
  add(result: SuiteResult, part: string): void {
    for (const row of result.rows) this.row(`${part}|${row.server}|${row.request}|${row.connections}`, row)
    for (const [name, value] of Object.entries(result.ratios)) this.ratio(name, value)
  }

  result(): SuiteResult {
    return { rows: [...this.rows.values()], ratios: Object.fromEntries(this.ratios) }
  }
}
