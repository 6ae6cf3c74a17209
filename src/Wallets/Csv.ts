import { LEDGER_CSV_COLUMNS } from "../Domain/Wallet.js"
import type { ExportRow } from "./Repo.js"

/** A spreadsheet runs a cell that begins with one of these as a formula (D13), tab and carriage return included. */
const FORMULA_START = /^[=+\-@\t\r]/

/**
 * One RFC 4180 field: empty for null; a cell a spreadsheet would run as a formula gets a
 * leading `'`; quoted, with quotes doubled, when it holds a quote, a comma or a line break.
 */
const field = (value: string | null): string => {
  if (value === null) return ""
  const guarded = FORMULA_START.test(value) ? `'${value}` : value
  return /[",\r\n]/.test(guarded) ? `"${guarded.replaceAll("\"", "\"\"")}"` : guarded
}

/** Lines end in CRLF, as RFC 4180 says. */
const line = (fields: ReadonlyArray<string | null>) => `${fields.map(field).join(",")}\r\n`

export const CSV_HEADER = line(LEDGER_CSV_COLUMNS)

/** An entry as a line of the export, in the header's order. */
export const csvLine = (row: ExportRow): string =>
  line([
    row.id,
    row.sequence,
    row.created_at,
    row.kind,
    row.amount_usd,
    row.budget_after_usd,
    row.reserved_after_usd,
    row.spent_after_usd,
    row.available_after_usd,
    row.session_id,
    row.task_id,
    row.idempotency_key,
    row.note,
    row.repository_id,
    row.user_id,
    row.model,
    row.labels,
    row.grants
  ])
