import { Schema } from "effect"

/** A page's size when a read names none (D7, D12). */
export const DEFAULT_PAGE_SIZE = 100

/** A page's size, 1 to 500, as the `limit` query parameter of every paged read takes it. */
export const Limit = (what: string) =>
  Schema.optionalWith(
    Schema.String.pipe(
      Schema.pattern(/^[0-9]{1,3}$/, {
        description: `How many ${what}, 1 to 500; ${DEFAULT_PAGE_SIZE} when omitted.`
      }),
      Schema.compose(Schema.NumberFromString),
      Schema.int(),
      Schema.between(1, 500)
    ).annotations({ message: () => ({ message: "must be an integer from 1 to 500", override: true }) }),
    { exact: true }
  )
