import { SqlClient } from "@effect/sql"
import { Effect, Option, Stream } from "effect"
import { orDefect } from "../Sql/Errors.js"

/** A wallet row as the books read it: balances as PostgreSQL's `numeric` text. */
export interface WalletBooks {
  readonly id: string
  readonly account_id: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly last_sequence: string
}

export interface EntryBooks {
  readonly id: string
  readonly sequence: string
  readonly kind: string
  readonly amount_usd: string
  readonly budget_after_usd: string
  readonly reserved_after_usd: string
  readonly spent_after_usd: string
}

/** A session whose row disagrees with its entries, replayed: what the ledger says and what the row says. */
export interface SessionDisagreement {
  readonly session_id: string
  readonly ledger_held_usd: string
  readonly ledger_spent_usd: string
  readonly ledger_unfunded_usd: string
  readonly row_held_usd: string | null
  readonly row_spent_usd: string | null
  readonly row_unfunded_usd: string | null
}

/**
 * A day's running total of one attribution (D16), model and set of labels (D19) that disagrees
 * with the spend entries: both sides, null where absent.
 */
export interface SpendTotalDisagreement {
  readonly day: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly model: string | null
  /** `{}` when none, as `pg` parses the `jsonb`. */
  readonly labels: Readonly<Record<string, string>>
  readonly ledger_spent_usd: string | null
  readonly ledger_unfunded_usd: string | null
  readonly ledger_sessions: number | null
  readonly row_spent_usd: string | null
  readonly row_unfunded_usd: string | null
  readonly row_sessions: number | null
}

/**
 * The ledger, read to be checked (D13). Rows are streamed through a cursor, so
 * a wallet of any size is read in constant memory; the session sums are
 * replayed in PostgreSQL, which returns only the sessions that disagree.
 */
export class BooksRepo extends Effect.Service<BooksRepo>()("Books/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const wallets = (accountId: Option.Option<string>): Stream.Stream<WalletBooks> =>
      sql<WalletBooks>`
        SELECT id, account_id, budget_usd, reserved_usd, spent_usd, last_sequence::text AS last_sequence
        FROM wallets
        WHERE ${Option.getOrNull(accountId)}::uuid IS NULL OR account_id = ${Option.getOrNull(accountId)}::uuid
        ORDER BY id`.stream.pipe(Stream.orDie)

    const entries = (walletId: string): Stream.Stream<EntryBooks> =>
      sql<EntryBooks>`
        SELECT e.id, e.sequence::text AS sequence, e.kind, e.amount_usd, e.budget_after_usd, e.reserved_after_usd, e.spent_after_usd
        FROM ledger_entries e WHERE e.wallet_id = ${walletId}
        ORDER BY e.sequence`.stream.pipe(Stream.orDie)

    /**
     * Each session's hold and spend replayed from its entries: a reserve adds its amount to
     * the hold, a release takes its amount off, a spend takes off what it drew from the hold
     * (the wallet's reserved balance before it minus after), adds its amount to spent and the
     * rest of it, beyond the hold, to unfunded (D12).
     */
    const sessionDisagreements = (walletId: string) =>
      sql<SessionDisagreement>`
        WITH replay AS (
          SELECT session_id, kind, amount_usd,
                 coalesce(lag(reserved_after_usd) OVER (ORDER BY sequence), 0) - reserved_after_usd AS drawn_from_hold
          FROM ledger_entries WHERE wallet_id = ${walletId}
        ), ledger AS (
          SELECT session_id,
                 sum(CASE kind WHEN 'reserve' THEN amount_usd WHEN 'reserve_release' THEN -amount_usd
                               WHEN 'spend' THEN -drawn_from_hold ELSE 0 END) AS held,
                 sum(CASE kind WHEN 'spend' THEN amount_usd ELSE 0 END) AS spent,
                 sum(CASE kind WHEN 'spend' THEN amount_usd - drawn_from_hold ELSE 0 END) AS unfunded
          FROM replay WHERE session_id IS NOT NULL GROUP BY session_id
        ), stored AS (
          SELECT session_id, held_usd, spent_usd, unfunded_usd FROM settlement_session_balances WHERE wallet_id = ${walletId}
        )
        SELECT coalesce(l.session_id, s.session_id) AS session_id,
               coalesce(l.held, 0)::numeric(18, 6)::text AS ledger_held_usd,
               coalesce(l.spent, 0)::numeric(18, 6)::text AS ledger_spent_usd,
               coalesce(l.unfunded, 0)::numeric(18, 6)::text AS ledger_unfunded_usd,
               s.held_usd::text AS row_held_usd, s.spent_usd::text AS row_spent_usd,
               s.unfunded_usd::text AS row_unfunded_usd
        FROM ledger l FULL JOIN stored s ON s.session_id = l.session_id
        WHERE s.session_id IS NULL OR coalesce(l.held, 0) <> s.held_usd OR coalesce(l.spent, 0) <> s.spent_usd
           OR coalesce(l.unfunded, 0) <> s.unfunded_usd
        ORDER BY 1`

    /**
     * The spend report's running totals (D16) replayed from the spend entries: per UTC day of the
     * entry, repository, user, model and labels (D19: an entry carries its spend's model and its
     * session's labels, as the totals' key does), the amounts spent, what was unfunded (as for the
     * sessions), and the sessions whose first spend it was. Only the groups that disagree come
     * back. The totals are read through the settlement feature's view `settlement_spend_total_rows`.
     * Labels compare as `jsonb` does (keys in any order), none and `{}` alike.
     */
    const spendTotalDisagreements = (walletId: string) =>
      sql<SpendTotalDisagreement>`
        WITH replay AS (
          SELECT kind, amount_usd, repository_id, user_id, model, coalesce(labels, '{}') AS labels,
                 (created_at AT TIME ZONE 'UTC')::date AS day,
                 coalesce(lag(reserved_after_usd) OVER (ORDER BY sequence), 0) - reserved_after_usd AS drawn_from_hold,
                 row_number() OVER (PARTITION BY session_id, kind ORDER BY sequence) = 1 AS first_spend
          FROM ledger_entries WHERE wallet_id = ${walletId}
        ), ledger AS (
          SELECT day, repository_id, user_id, model, labels, sum(amount_usd) AS spent,
                 sum(amount_usd - drawn_from_hold) AS unfunded, count(*) FILTER (WHERE first_spend) AS sessions
          FROM replay WHERE kind = 'spend' GROUP BY day, repository_id, user_id, model, labels
        ), stored AS (
          SELECT day, repository_id, user_id, model, coalesce(labels, '{}') AS labels, spent_usd, unfunded_usd, sessions
          FROM settlement_spend_total_rows WHERE wallet_id = ${walletId}
        )
        SELECT coalesce(l.day, s.day)::text AS day, coalesce(l.repository_id, s.repository_id)::text AS repository_id,
               coalesce(l.user_id, s.user_id)::text AS user_id, coalesce(l.model, s.model) AS model,
               coalesce(l.labels, s.labels) AS labels,
               l.spent::numeric(18, 6)::text AS ledger_spent_usd, l.unfunded::numeric(18, 6)::text AS ledger_unfunded_usd,
               l.sessions::integer AS ledger_sessions, s.spent_usd::text AS row_spent_usd,
               s.unfunded_usd::text AS row_unfunded_usd, s.sessions AS row_sessions
        FROM ledger l FULL JOIN stored s
          ON s.day = l.day
          -- Null is a group of its own (unattributed); a full join needs an equality to hash on.
          AND coalesce(s.repository_id, '00000000-0000-0000-0000-000000000000') = coalesce(l.repository_id, '00000000-0000-0000-0000-000000000000')
          AND coalesce(s.user_id, '00000000-0000-0000-0000-000000000000') = coalesce(l.user_id, '00000000-0000-0000-0000-000000000000')
          -- A model is 1 to 100 printable characters (D19), so '' stands for none.
          AND coalesce(s.model, '') = coalesce(l.model, '') AND s.labels = l.labels
        WHERE l.day IS NULL OR s.day IS NULL OR l.spent <> s.spent_usd OR l.unfunded <> s.unfunded_usd
           OR l.sessions <> s.sessions
        ORDER BY 1, 2, 3, 4, 5`

    /** What the wallet's sessions hold between them: the wallet's reserved balance, when the books balance (D12). */
    const sessionsHeld = (walletId: string) =>
      Effect.map(
        sql<{ readonly held: string }>`
          SELECT coalesce(sum(held_usd), 0)::text AS held FROM settlement_session_balances
          WHERE wallet_id = ${walletId}`,
        (rows) => rows[0]?.held ?? "0"
      )

    return {
      wallets,
      entries,
      sessionDisagreements: orDefect(sessionDisagreements),
      sessionsHeld: orDefect(sessionsHeld),
      spendTotalDisagreements: orDefect(spendTotalDisagreements)
    } as const
  })
}) {}
