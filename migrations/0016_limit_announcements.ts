import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * D17 (docs/decisions/D17-events-and-webhooks.md), the settlement's events: which spend limits
 * have had their `limit.reached` event in which period. "Once per limit per period" must hold
 * across batches and worker processes; the batch reads this under its wallets' locks (as it reads
 * the limits' use) and adds to it in its own transaction, so an announcement exists exactly when
 * its event does.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // A row per limit and period (its first UTC day): a few per limit and month, so it stays small. A
  // limit the account removes takes its rows with it.
  yield* sql`
    CREATE TABLE settlement_limit_announcements (
      limit_id uuid NOT NULL REFERENCES spend_limits (id) ON DELETE CASCADE,
      period_start date NOT NULL,
      announced_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (limit_id, period_start)
    )`
})
