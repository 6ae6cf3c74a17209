import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // D12: what a session was charged beyond its holds. Filled for existing sessions from the
  // ledger: a spend draws from the hold what the wallet's reserved balance fell by (the entry
  // before it minus its own), and the rest of its amount was unfunded. A session's opened_at
  // and last_activity_at are the row's created_at (its first reserve's transaction) and
  // updated_at (every job and the expiry sweep write it), so they need no column of their own.
  yield* sql`
    ALTER TABLE settlement_sessions
      ADD COLUMN unfunded_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (unfunded_usd >= 0)`
  yield* sql`
    UPDATE settlement_sessions s SET unfunded_usd = u.unfunded
    FROM (
      SELECT wallet_id, session_id, sum(amount_usd - drawn) AS unfunded
      FROM (
        SELECT wallet_id, session_id, kind, amount_usd,
               coalesce(lag(reserved_after_usd) OVER (PARTITION BY wallet_id ORDER BY sequence), 0)
                 - reserved_after_usd AS drawn
        FROM ledger_entries
      ) replayed
      WHERE kind = 'spend'
      GROUP BY wallet_id, session_id
    ) u
    WHERE s.wallet_id = u.wallet_id AND s.session_id = u.session_id AND u.unfunded > 0`
  // The sessions view pages newest first on (opened, session), as the ledger does on sequence.
  yield* sql`CREATE INDEX settlement_sessions_listing_idx ON settlement_sessions (wallet_id, created_at DESC, session_id DESC)`
  // A session's own entries, in order, without reading the rest of its wallet's ledger.
  yield* sql`CREATE INDEX ledger_entries_session_idx ON ledger_entries (wallet_id, session_id, sequence) WHERE session_id IS NOT NULL`

  // D12's heartbeat: a fourth job kind, which answers session_closed on a closed session, and
  // whose first result (the new expiry) a duplicate answers again.
  yield* sql`ALTER TYPE settlement_outcome ADD VALUE IF NOT EXISTS 'session_closed'`
  yield* sql`ALTER TABLE settlement_records DROP CONSTRAINT settlement_records_kind_check`
  yield* sql`
    ALTER TABLE settlement_records
      ADD CONSTRAINT settlement_records_kind_check CHECK (kind IN ('reserve', 'spend', 'release', 'extend')),
      ADD COLUMN expires_at timestamptz`

  // D13's export names each entry's idempotency key. Written with every entry from now on;
  // filled for settlement entries from their records (budget and credit keys were not linked
  // to their entries before, so theirs stay null). The append-only trigger is lifted for this
  // one statement, inside the migration's transaction.
  yield* sql`ALTER TABLE ledger_entries ADD COLUMN idempotency_key text`
  yield* sql`ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only`
  yield* sql`
    UPDATE ledger_entries e SET idempotency_key = r.idempotency_key
    FROM (SELECT wallet_id, idempotency_key, unnest(entry_ids) AS entry_id FROM settlement_records) r
    WHERE e.id = r.entry_id AND e.wallet_id = r.wallet_id`
  yield* sql`ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only`
})
