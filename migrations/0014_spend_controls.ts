import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** D16 (docs/decisions/D16-spend-controls.md): attribution, session caps, limits and the spend report's running totals. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  // Attribution: set by a session's first reserve, null for sessions and entries made before it
  // (or never attributed). A repository or user id is checked against the job's account when
  // the job is decided, so no foreign key is needed to keep it honest; none is declared, so an
  // account's repositories and users can go without rewriting its books.
  yield* sql`
    ALTER TABLE settlement_sessions
      ADD COLUMN repository_id uuid,
      ADD COLUMN user_id uuid,
      ADD COLUMN max_usd numeric(18, 6) CHECK (max_usd > 0)`
  // Adding nullable columns rewrites nothing, so the append-only trigger need not be lifted.
  yield* sql`ALTER TABLE ledger_entries ADD COLUMN repository_id uuid, ADD COLUMN user_id uuid`
  // What a repository's or a user's limit sums: its open sessions' holds, without a scan of the rest.
  yield* sql`
    CREATE INDEX settlement_sessions_repository_open_idx ON settlement_sessions (wallet_id, repository_id)
      WHERE state = 'open' AND repository_id IS NOT NULL`
  yield* sql`
    CREATE INDEX settlement_sessions_user_open_idx ON settlement_sessions (wallet_id, user_id)
      WHERE state = 'open' AND user_id IS NOT NULL`
  // A session limit's use is the largest open session of the wallet: read without its closed ones.
  yield* sql`CREATE INDEX settlement_sessions_open_idx ON settlement_sessions (wallet_id) WHERE state = 'open'`

  // An account's limits, replaced whole by PUT (versions as D5: no row is version 0).
  yield* sql`
    CREATE TABLE spend_limit_sets (
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      version integer NOT NULL CHECK (version > 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_kind, account_id)
    )`
  yield* sql`
    CREATE TABLE spend_limits (
      id uuid PRIMARY KEY DEFAULT uuid_v7(),
      account_kind account_kind NOT NULL,
      account_id uuid NOT NULL,
      scope text NOT NULL CHECK (scope IN ('account', 'repository', 'user', 'session')),
      scope_id uuid,
      period text NOT NULL CHECK (period IN ('day', 'week', 'month', 'session')),
      amount_usd numeric(18, 6) NOT NULL CHECK (amount_usd > 0),
      FOREIGN KEY (account_kind, account_id) REFERENCES spend_limit_sets (account_kind, account_id) ON DELETE CASCADE,
      CHECK ((scope IN ('repository', 'user')) = (scope_id IS NOT NULL)),
      CHECK ((scope = 'session') = (period = 'session')),
      UNIQUE NULLS NOT DISTINCT (account_kind, account_id, scope, scope_id, period)
    )`

  // The spend report's running totals (and the spends side of a limit's use): per wallet, UTC day,
  // repository and user, written in the settlement transaction that books the spend. A report or a
  // limit over a month sums at most 31 rows per attribution, however long the ledger.
  yield* sql`
    CREATE TABLE settlement_spend_totals (
      wallet_id uuid NOT NULL REFERENCES wallets (id),
      day date NOT NULL,
      repository_id uuid,
      user_id uuid,
      spent_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (spent_usd >= 0),
      unfunded_usd numeric(18, 6) NOT NULL DEFAULT 0 CHECK (unfunded_usd >= 0),
      sessions integer NOT NULL DEFAULT 0 CHECK (sessions >= 0),
      CONSTRAINT settlement_spend_totals_key UNIQUE NULLS NOT DISTINCT (wallet_id, day, repository_id, user_id)
    )`
})
