import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Only a mutation's first success is recorded (D6), so every record's status is 200: the
  // service records the result and the handler says how a replay answers. The column is no
  // longer written or read; its default keeps inserts of this release valid while processes
  // of the previous one still write it. A later migration drops it.
  yield* sql`ALTER TABLE wallet_idempotency ALTER COLUMN response_status SET DEFAULT 200`
})
