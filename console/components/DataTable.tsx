import type { ComponentChildren } from "preact"

export interface Column<R> {
  readonly header: string
  readonly cell: (row: R) => ComponentChildren
  /** Right-aligned, for amounts. */
  readonly numeric?: boolean
}

/**
 * A table with a caption. On a narrow screen (375 px) each row becomes a card, each cell with its
 * column's name beside it (styles.css, from `data-label`), so nothing is cut mid-value and
 * nothing needs scrolling sideways.
 */
export function DataTable<R>(
  { caption, columns, rows, rowKey, empty }: {
    readonly caption: string
    readonly columns: ReadonlyArray<Column<R>>
    readonly rows: ReadonlyArray<R>
    readonly rowKey: (row: R) => string
    readonly empty: string
  }
) {
  return (
    <div class="table-scroll" tabIndex={0} role="region" aria-label={caption}>
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column.header} scope="col" class={column.numeric === true ? "numeric" : undefined}>
                {column.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0
            ? (
              <tr>
                <td colSpan={columns.length}>{empty}</td>
              </tr>
            )
            : rows.map((row) => (
              <tr key={rowKey(row)}>
                {columns.map((column) => (
                  <td
                    key={column.header}
                    class={column.numeric === true ? "numeric" : undefined}
                    data-label={column.header}
                  >
                    {column.cell(row)}
                  </td>
                ))}
              </tr>
            ))}
        </tbody>
      </table>
    </div>
  )
}
