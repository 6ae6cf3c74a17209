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

/** A wallet row that disagrees with its newest entry (D19): the row, and what the entry says (zeros when none). */
export interface WalletDrift {
  readonly wallet_id: string
  readonly account_id: string
  readonly budget_usd: string
  readonly reserved_usd: string
  readonly spent_usd: string
  readonly last_sequence: string
  readonly ledger_budget_usd: string
  readonly ledger_reserved_usd: string
  readonly ledger_spent_usd: string
  readonly ledger_sequence: string
  /** How many wallets disagree in all, the same on every row. */
  readonly drifted: number
}

/** A running total's group (wallet, UTC day, repository, user) whose sums disagree with its spend entries (D19). */
export interface SpendTotalDrift {
  readonly wallet_id: string
  readonly account_id: string
  readonly day: string
  readonly repository_id: string | null
  readonly user_id: string | null
  readonly ledger_spent_usd: string | null
  readonly ledger_unfunded_usd: string | null
  readonly row_spent_usd: string | null
  readonly row_unfunded_usd: string | null
  /** How many groups disagree in all, the same on every row. */
  readonly drifted: number
}

/**
 * A grant (D21) whose row disagrees with its entries, replayed: what the ledger says (null fields
 * when no entry names it) and what the row says (null fields when there is no row).
 */
export interface GrantDrift {
  readonly wallet_id: string
  readonly account_id: string
  readonly grant_id: string
  /** Whether any entry names it; the ledger's fields are null when none does. */
  readonly in_ledger: boolean
  /** Its `credit_added` entry: null unless exactly one entry added it. */
  readonly ledger_entry_id: string | null
  readonly ledger_amount_usd: string | null
  readonly ledger_drawn_usd: string | null
  readonly ledger_held_usd: string | null
  readonly ledger_ended_usd: string | null
  /** The state its entries leave it in: voided or expired by such an entry, else used when all drawn, else live. */
  readonly ledger_state: string | null
  readonly row_entry_id: string | null
  readonly row_amount_usd: string | null
  readonly row_drawn_usd: string | null
  readonly row_held_usd: string | null
  readonly row_ended_usd: string | null
  readonly row_state: string | null
  /** Whether the row's `ended_at` is set; null when there is no row. */
  readonly row_ended_at_set: boolean | null
  /** How many grants disagree in all, the same on every row. */
  readonly drifted: number
}

/** A grant whose held amount (D21) is not what its wallet's open sessions earmarked on it: both sides, null where absent. */
export interface EarmarkDisagreement {
  readonly grant_id: string
  readonly row_held_usd: string | null
  readonly earmarked_usd: string
}

/** A wallet's grants (D21) summed: their part of its budget, of its holds and of its spending. */
export interface GrantTotals {
  readonly budget_usd: string
  readonly held_usd: string
  readonly drawn_usd: string
}

/** How many disagree, and the first `listed` of them, in a stable order. */
export interface Drifted<A> {
  readonly count: number
  readonly listed: ReadonlyArray<A>
}

const drifted = <A extends { readonly drifted: number }>(rows: ReadonlyArray<A>): Drifted<A> => ({
  count: rows[0]?.drifted ?? 0,
  listed: rows
})

/**
 * The ledger, read to be checked (D13). Rows are streamed through a cursor, so
 * a wallet of any size is read in constant memory; the session sums are
 * replayed in PostgreSQL, which returns only the sessions that disagree.
 */
/** A counter by scope key and what the rows it follows sum to: a day's spends, or (no day) the open holds. */
export interface ScopeCounterDisagreement {
  readonly scope: string
  readonly scope_key: string
  readonly day: string | null
  readonly found_usd: string
  readonly expected_usd: string
  readonly found_open: number
  readonly expected_open: number
}

export class BooksRepo extends Effect.Service<BooksRepo>()("Books/Repo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * What an entry drew from the wallet's holds: the reserved balance before it (the entry
     * before it, in its wallet) minus after it. A spend's amount beyond it was unfunded (D12).
     * The one statement of the rule, for every check here.
     */
    const drawnFromHold =
      sql`coalesce(lag(reserved_after_usd) OVER (PARTITION BY wallet_id ORDER BY sequence), 0) - reserved_after_usd`
    /** The running totals' day of an entry (D16): its UTC date. */
    const spendDay = sql`(created_at AT TIME ZONE 'UTC')::date`
    /**
     * A total's group matched to its entries' (`s` and `l`): null is a group of its own (unattributed),
     * and a full join needs an equality to hash on.
     */
    const sameAttribution = sql`
      coalesce(s.repository_id, '00000000-0000-0000-0000-000000000000') = coalesce(l.repository_id, '00000000-0000-0000-0000-000000000000')
      AND coalesce(s.user_id, '00000000-0000-0000-0000-000000000000') = coalesce(l.user_id, '00000000-0000-0000-0000-000000000000')`

    /**
     * Every grant (D21) of the wallets in `scope` replayed from their entries' `grants` items,
     * beside its row read through the wallet feature's view `wallet_grant_balances`; only the
     * grants that disagree come back, the first `listed` of them. Its amount is its `credit_added`
     * entry's item (that entry's id the row's `entry_id`), drawn the spends' items, held the
     * reserves' items less the releases' and what the spends' items drew of the earmarks
     * (`from_reserved_usd`), ended the `credit_expired` and `credit_voided` items. The state the
     * entries leave it in is voided or expired by such an entry, else used once all of it is
     * drawn, else live; an ended grant's row has its `ended_at` set, a live one's not. One pass
     * over the scope's entries that name a grant.
     */
    const grantDrift = (
      scope: { readonly wallet: string } | { readonly account: Option.Option<string> },
      listed: number
    ) => {
      const [ofEntries, ofGrants] = "wallet" in scope
        ? [sql`e.wallet_id = ${scope.wallet}`, sql`wallet_id = ${scope.wallet}`]
        : Option.match(scope.account, {
          onNone: () => [sql`true`, sql`true`],
          onSome: (id) => [
            sql`e.wallet_id IN (SELECT id FROM wallets WHERE account_id = ${id})`,
            sql`wallet_id IN (SELECT id FROM wallets WHERE account_id = ${id})`
          ]
        })
      return Effect.map(
        sql<GrantDrift>`
          WITH items AS (
            SELECT e.wallet_id, e.id::text AS entry_id, e.kind, i.grant_id, i.amount_usd,
                   coalesce(i.from_reserved_usd, 0) AS from_reserved
            FROM ledger_entries e,
                 jsonb_to_recordset(e.grants) AS i (grant_id text, amount_usd numeric, from_reserved_usd numeric)
            WHERE ${ofEntries} AND e.grants IS NOT NULL
          ), ledger AS (
            SELECT wallet_id, grant_id,
                   CASE WHEN count(*) FILTER (WHERE kind = 'credit_added') = 1
                     THEN min(entry_id) FILTER (WHERE kind = 'credit_added') END AS entry_id,
                   sum(amount_usd) FILTER (WHERE kind = 'credit_added') AS amount,
                   coalesce(sum(amount_usd) FILTER (WHERE kind = 'spend'), 0) AS drawn,
                   sum(CASE kind WHEN 'reserve' THEN amount_usd WHEN 'reserve_release' THEN -amount_usd
                                 WHEN 'spend' THEN -from_reserved ELSE 0 END) AS held,
                   coalesce(sum(amount_usd) FILTER (WHERE kind IN ('credit_expired', 'credit_voided')), 0) AS ended,
                   bool_or(kind = 'credit_voided') AS voided, bool_or(kind = 'credit_expired') AS expired
            FROM items GROUP BY wallet_id, grant_id
          ), replayed AS (
            SELECT *, CASE WHEN voided THEN 'voided' WHEN expired THEN 'expired'
                           WHEN drawn = amount THEN 'used' ELSE 'live' END AS state
            FROM ledger
          ), stored AS (
            SELECT wallet_id, grant_id::text AS grant_id, entry_id::text AS entry_id, amount_usd, drawn_usd, held_usd,
                   ended_usd, state::text AS state, ended_at IS NOT NULL AS ended_at_set
            FROM wallet_grant_balances WHERE ${ofGrants}
          ), disagreeing AS (
            SELECT coalesce(l.wallet_id, s.wallet_id) AS wallet_id, coalesce(l.grant_id, s.grant_id) AS grant_id,
                   l.grant_id IS NOT NULL AS in_ledger, l.entry_id AS ledger_entry_id, l.amount AS ledger_amount,
                   l.drawn AS ledger_drawn, l.held AS ledger_held, l.ended AS ledger_ended, l.state AS ledger_state,
                   s.entry_id AS row_entry_id, s.amount_usd AS row_amount, s.drawn_usd AS row_drawn,
                   s.held_usd AS row_held, s.ended_usd AS row_ended, s.state AS row_state, s.ended_at_set
            FROM replayed l FULL JOIN stored s ON s.wallet_id = l.wallet_id AND s.grant_id = l.grant_id
            WHERE l.grant_id IS NULL OR s.grant_id IS NULL OR l.entry_id IS DISTINCT FROM s.entry_id
               OR l.amount IS DISTINCT FROM s.amount_usd OR l.drawn <> s.drawn_usd OR l.held <> s.held_usd
               OR l.ended <> s.ended_usd OR l.state <> s.state
               OR (s.state <> 'used' AND s.ended_at_set <> (s.state <> 'live'))
          )
          SELECT d.wallet_id, w.account_id, d.grant_id, d.in_ledger, d.ledger_entry_id,
                 d.ledger_amount::numeric(18, 6)::text AS ledger_amount_usd,
                 d.ledger_drawn::numeric(18, 6)::text AS ledger_drawn_usd,
                 d.ledger_held::numeric(18, 6)::text AS ledger_held_usd,
                 d.ledger_ended::numeric(18, 6)::text AS ledger_ended_usd, d.ledger_state, d.row_entry_id,
                 d.row_amount::text AS row_amount_usd, d.row_drawn::text AS row_drawn_usd,
                 d.row_held::text AS row_held_usd, d.row_ended::text AS row_ended_usd, d.row_state,
                 d.ended_at_set AS row_ended_at_set, count(*) OVER ()::integer AS drifted
          FROM disagreeing d JOIN wallets w ON w.id = d.wallet_id
          ORDER BY d.wallet_id, d.grant_id
          LIMIT ${listed}`,
        drifted<GrantDrift>
      )
    }

    /**
     * The wallet's grants (D21) whose held amount is not what its open sessions earmarked on them,
     * summed per grant, through the settlement feature's view `settlement_session_earmarks`.
     */
    const earmarkDisagreements = (walletId: string, listed: number) =>
      sql<EarmarkDisagreement>`
        WITH earmarked AS (
          SELECT grant_id, sum(amount_usd) AS earmarked FROM settlement_session_earmarks
          WHERE wallet_id = ${walletId} GROUP BY grant_id
        ), stored AS (
          SELECT grant_id::text AS grant_id, held_usd FROM wallet_grant_balances WHERE wallet_id = ${walletId}
        )
        SELECT coalesce(e.grant_id, s.grant_id) AS grant_id, s.held_usd::text AS row_held_usd,
               coalesce(e.earmarked, 0)::numeric(18, 6)::text AS earmarked_usd
        FROM earmarked e FULL JOIN stored s ON s.grant_id = e.grant_id
        WHERE s.grant_id IS NULL OR coalesce(e.earmarked, 0) <> s.held_usd
        ORDER BY 1
        LIMIT ${listed}`

    /**
     * What the wallet's grants (D21) hold of its balances between them: their budget (amount less
     * ended), what they have earmarked and what was drawn from them. Each is at most the wallet's
     * own, the rest being the base's, when the books balance.
     */
    const grantTotals = (walletId: string) =>
      Effect.map(
        sql<GrantTotals>`
          SELECT coalesce(sum(amount_usd - ended_usd), 0)::numeric(18, 6)::text AS budget_usd,
                 coalesce(sum(held_usd), 0)::numeric(18, 6)::text AS held_usd,
                 coalesce(sum(drawn_usd), 0)::numeric(18, 6)::text AS drawn_usd
          FROM wallet_grant_balances WHERE wallet_id = ${walletId}`,
        (rows): GrantTotals => rows[0] ?? { budget_usd: "0", held_usd: "0", drawn_usd: "0" }
      )

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
          SELECT session_id, kind, amount_usd, ${drawnFromHold} AS drawn_from_hold
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
                 ${spendDay} AS day, ${drawnFromHold} AS drawn_from_hold,
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
          ON s.day = l.day AND ${sameAttribution}
          -- A model is 1 to 100 printable characters (D19), so '' stands for none.
          AND coalesce(s.model, '') = coalesce(l.model, '') AND s.labels = l.labels
        WHERE l.day IS NULL OR s.day IS NULL OR l.spent <> s.spent_usd OR l.unfunded <> s.unfunded_usd
           OR l.sessions <> s.sessions
        ORDER BY 1, 2, 3, 4, 5`

    /**
     * Every wallet row (or the account's) against its newest entry's balances and sequence (D19):
     * one probe of `(wallet_id, sequence)` per wallet, backwards, whatever the ledger's length.
     */
    const walletDrift = (accountId: Option.Option<string>, listed: number) =>
      Effect.map(
        sql<WalletDrift>`
          SELECT w.id AS wallet_id, w.account_id, w.budget_usd::text AS budget_usd, w.reserved_usd::text AS reserved_usd,
                 w.spent_usd::text AS spent_usd, w.last_sequence::text AS last_sequence,
                 coalesce(e.budget_after_usd, 0)::numeric(18, 6)::text AS ledger_budget_usd,
                 coalesce(e.reserved_after_usd, 0)::numeric(18, 6)::text AS ledger_reserved_usd,
                 coalesce(e.spent_after_usd, 0)::numeric(18, 6)::text AS ledger_spent_usd,
                 coalesce(e.sequence, 0)::text AS ledger_sequence,
                 count(*) OVER ()::integer AS drifted
          FROM wallets w
          LEFT JOIN LATERAL (
            SELECT sequence, budget_after_usd, reserved_after_usd, spent_after_usd FROM ledger_entries
            WHERE wallet_id = w.id ORDER BY sequence DESC LIMIT 1
          ) e ON true
          WHERE ${Option.match(accountId, { onNone: () => sql`true`, onSome: (id) => sql`w.account_id = ${id}` })}
            AND (w.budget_usd, w.reserved_usd, w.spent_usd, w.last_sequence) IS DISTINCT FROM
                (coalesce(e.budget_after_usd, 0), coalesce(e.reserved_after_usd, 0), coalesce(e.spent_after_usd, 0),
                 coalesce(e.sequence, 0))
          ORDER BY w.id
          LIMIT ${listed}`,
        drifted<WalletDrift>
      )

    /**
     * Every running total (or the account's) against the spend entries (D19), as one aggregate:
     * the entries summed per wallet, UTC day, repository and user, spent and unfunded, beside the
     * totals' rows summed per the same group (a group may have several rows), and only the groups
     * that disagree come back. One pass over the ledger in `(wallet_id, sequence)` order.
     */
    const spendTotalDrift = (accountId: Option.Option<string>, listed: number) => {
      const ofAccount = Option.match(accountId, {
        onNone: () => sql`true`,
        onSome: (id) => sql`wallet_id IN (SELECT id FROM wallets WHERE account_id = ${id})`
      })
      return Effect.map(
        sql<SpendTotalDrift>`
          WITH replay AS (
            SELECT wallet_id, kind, amount_usd, repository_id, user_id, ${spendDay} AS day,
                   ${drawnFromHold} AS drawn_from_hold
            FROM ledger_entries WHERE ${ofAccount}
          ), ledger AS (
            SELECT wallet_id, day, repository_id, user_id, sum(amount_usd) AS spent,
                   sum(amount_usd - drawn_from_hold) AS unfunded
            FROM replay WHERE kind = 'spend' GROUP BY wallet_id, day, repository_id, user_id
          ), stored AS (
            SELECT wallet_id, day, repository_id, user_id, sum(spent_usd) AS spent, sum(unfunded_usd) AS unfunded
            FROM settlement_spend_total_rows WHERE ${ofAccount} GROUP BY wallet_id, day, repository_id, user_id
          ), disagreeing AS (
            SELECT coalesce(l.wallet_id, s.wallet_id) AS wallet_id, coalesce(l.day, s.day) AS day,
                   coalesce(l.repository_id, s.repository_id) AS repository_id, coalesce(l.user_id, s.user_id) AS user_id,
                   l.spent AS ledger_spent, l.unfunded AS ledger_unfunded, s.spent AS row_spent, s.unfunded AS row_unfunded
            FROM ledger l FULL JOIN stored s
              ON s.wallet_id = l.wallet_id AND s.day = l.day AND ${sameAttribution}
            WHERE l.day IS NULL OR s.day IS NULL OR l.spent <> s.spent OR l.unfunded <> s.unfunded
          )
          SELECT d.wallet_id, w.account_id, d.day::text AS day, d.repository_id::text AS repository_id,
                 d.user_id::text AS user_id,
                 d.ledger_spent::numeric(18, 6)::text AS ledger_spent_usd,
                 d.ledger_unfunded::numeric(18, 6)::text AS ledger_unfunded_usd,
                 d.row_spent::numeric(18, 6)::text AS row_spent_usd,
                 d.row_unfunded::numeric(18, 6)::text AS row_unfunded_usd,
                 count(*) OVER ()::integer AS drifted
          FROM disagreeing d JOIN wallets w ON w.id = d.wallet_id
          ORDER BY d.wallet_id, d.day, d.repository_id, d.user_id
          LIMIT ${listed}`,
        drifted<SpendTotalDrift>
      )
    }

    /** What the wallet's sessions hold between them: the wallet's reserved balance, when the books balance (D12). */
    const sessionsHeld = (walletId: string) =>
      Effect.map(
        sql<{ readonly held: string }>`
          SELECT coalesce(sum(held_usd), 0)::text AS held FROM settlement_session_balances
          WHERE wallet_id = ${walletId}`,
        (rows) => rows[0]?.held ?? "0"
      )

    /**
     * The wallet's counters by scope key that disagree with the running totals and open sessions
     * they follow (D16, "A limit's use by scope key"), through settlement's view of them.
     */
    const scopeCounterDisagreements = (walletId: string) =>
      sql<ScopeCounterDisagreement>`
        SELECT scope, scope_key, day::text AS day, found_usd::numeric(30, 6)::text AS found_usd,
               expected_usd::numeric(30, 6)::text AS expected_usd, found_open, expected_open
        FROM settlement_scope_counter_disagreements WHERE wallet_id = ${walletId}
        ORDER BY scope, scope_key, day NULLS FIRST`

    return {
      wallets,
      entries,
      scopeCounterDisagreements: orDefect(scopeCounterDisagreements),
      sessionDisagreements: orDefect(sessionDisagreements),
      sessionsHeld: orDefect(sessionsHeld),
      spendTotalDisagreements: orDefect(spendTotalDisagreements),
      walletDrift: orDefect(walletDrift),
      spendTotalDrift: orDefect(spendTotalDrift),
      grantDrift: orDefect(grantDrift),
      earmarkDisagreements: orDefect(earmarkDisagreements),
      grantTotals: orDefect(grantTotals)
    } as const
  })
}) {}
