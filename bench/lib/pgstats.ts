import type pg from "pg"

/**
 * What PostgreSQL itself says a round cost it: the statements' planning and execution time
 * (`pg_stat_statements`, loaded on the bench's own server with planning tracked) and the rows
 * and index entries written, read from the WAL the round wrote (`pg_walinspect`). Both read
 * between two points of the round, on the round's database; each is undefined where the
 * server cannot say (the shared server has no `pg_stat_statements` loaded).
 */

/** Creates the extensions in the database, where the server allows: whether each is usable. */
export const enableStatistics = async (client: pg.Client) => {
  const usable = async (create: string, probe: string) => {
    try {
      await client.query(create)
      await client.query(probe)
      return true
    } catch {
      return false
    }
  }
  return {
    statements: await usable(
      "CREATE EXTENSION IF NOT EXISTS pg_stat_statements",
      "SELECT total_plan_time FROM pg_stat_statements LIMIT 1"
    ),
    wal: await usable(
      "CREATE EXTENSION IF NOT EXISTS pg_walinspect",
      "SELECT 'pg_get_wal_stats(pg_lsn, pg_lsn, boolean)'::regprocedure"
    )
  } as const
}

export interface StatementTimes {
  readonly planMs: number
  readonly execMs: number
}

/** Planning and execution time so far of every statement run in this database, in milliseconds. */
export const statementTimes = async (client: pg.Client): Promise<StatementTimes | undefined> => {
  try {
    const { rows } = await client.query<{ readonly plan: string | null; readonly exec: string | null }>(
      `SELECT sum(total_plan_time)::text AS plan, sum(total_exec_time)::text AS exec FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    )
    return { planMs: Number(rows[0]?.plan ?? 0), execMs: Number(rows[0]?.exec ?? 0) }
  } catch {
    return undefined
  }
}

/**
 * Planning's share of the statements' time between two readings:
 * `plan / (plan + exec)`. Undefined without readings or without any time between them.
 */
export const planningShare = (before: StatementTimes | undefined, after: StatementTimes | undefined) => {
  if (before === undefined || after === undefined) return undefined
  const plan = after.planMs - before.planMs
  const exec = after.execMs - before.execMs
  return plan + exec > 0 ? plan / (plan + exec) : undefined
}

/**
 * Where the WAL is flushed to now: a round's commits are flushed before their results are
 * acknowledged (`synchronous_commit` on), so this point at a round's end follows all its writes.
 */
export const walPosition = async (client: pg.Client): Promise<string | undefined> => {
  try {
    const { rows } = await client.query<{ readonly lsn: string }>(`SELECT pg_current_wal_flush_lsn()::text AS lsn`)
    return rows[0]?.lsn
  } catch {
    return undefined
  }
}

export interface Writes {
  /** Heap tuples written: inserted, updated, updated in place (HOT). */
  readonly rows: number
  /** Of them, updates that wrote no index entry (HOT). */
  readonly hotUpdates: number
  /** B-tree leaf entries written (an insert, a posting-list insert, or the new entry of a page split). */
  readonly indexEntries: number
}

/**
 * The rows and index entries the WAL between two positions records, counted by record type
 * (every writer's: in a round, the worker's and the webhooks process's). Unlike
 * `pg_stat_user_tables`, whose counts a backend publishes at most once a second and an idle one
 * ten seconds later, the WAL holds every write as soon as its commit returns.
 */
export const writesBetween = async (
  client: pg.Client,
  from: string | undefined,
  to: string | undefined
): Promise<Writes | undefined> => {
  if (from === undefined || to === undefined) return undefined
  // The function refuses an empty range: nothing was written.
  if (from === to) return { rows: 0, hotUpdates: 0, indexEntries: 0 }
  try {
    const { rows } = await client.query<{ readonly type: string; readonly count: string }>(
      `SELECT "resource_manager/record_type" AS type, count::text FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true)
       WHERE count > 0`,
      [from, to]
    )
    const count = (pattern: RegExp) =>
      rows.filter((row) => pattern.test(row.type)).reduce((sum, row) => sum + Number(row.count), 0)
    return {
      rows: count(/^Heap\/(INSERT|UPDATE|HOT_UPDATE)(\+INIT)?$/) + count(/^Heap2\/MULTI_INSERT(\+INIT)?$/),
      hotUpdates: count(/^Heap\/HOT_UPDATE(\+INIT)?$/),
      indexEntries: count(/^Btree\/(INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)$/)
    }
  } catch {
    return undefined
  }
}
