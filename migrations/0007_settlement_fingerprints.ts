import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A key belongs to one job (D8): with its kind and session, already recorded, the amount tells a
  // repeat from a different job under the same key. Records made before this column have none, and
  // are then compared by kind and session alone.
  yield* sql`ALTER TABLE settlement_records ADD COLUMN amount_usd numeric(18, 6)`
})
