import { userInfo } from "node:os"
import pg from "pg"

/** The server the suite runs against: `DATABASE_URL` (set by `npm test`) or the local default. */
export const serverUrl = (): URL => {
  const url = new URL(process.env.DATABASE_URL ?? "postgres://localhost:5432/account_api")
  if (url.username === "") url.username = process.env.PGUSER ?? userInfo().username
  return url
}

export const databaseUrl = (database: string): string => {
  const url = serverUrl()
  url.pathname = `/${database}`
  return url.toString()
}

/** Runs one statement on the maintenance database (CREATE/DROP DATABASE cannot run inside a pool transaction). */
export const adminQuery = async (statement: string): Promise<void> => {
  await adminRows(statement)
}

/** The first column of each row a statement on the maintenance database returns. */
export const adminRows = async (statement: string): Promise<Array<string>> => {
  const client = new pg.Client({ connectionString: databaseUrl("postgres") })
  await client.connect()
  try {
    const result = await client.query<Record<string, unknown>>(statement)
    return result.rows.map((row) => String(Object.values(row)[0]))
  } finally {
    await client.end()
  }
}
