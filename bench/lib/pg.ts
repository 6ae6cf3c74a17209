import pg from "pg"

/**
 * A connected `pg` client whose `error` events are written to stderr instead of crashing the
 * run: a connection the server ends (the database dropped WITH (FORCE) at clean-up, a backend
 * terminated, `57P01`) emits one, and an `error` event without a listener is an uncaught
 * exception. A query on such a client fails as it would anyway.
 */
export const openClient = async (config: pg.ClientConfig): Promise<pg.Client> => {
  const client = new pg.Client(config)
  listenForErrors(client, config.application_name ?? "bench client")
  await client.connect()
  return client
}

/** What was said already: a clean-up that cuts off many connections at once says so once a kind. */
const said = new Set<string>()

/** The `error` listener every client and pool the bench opens carries (see `openClient`). */
export const listenForErrors = (emitter: pg.Client | pg.Pool, name: string): void => {
  emitter.on("error", (error: Error & { readonly code?: string }) => {
    const line = `${name}: connection error${error.code === undefined ? "" : ` ${error.code}`}: ${error.message}`
    if (said.has(line)) return
    said.add(line)
    process.stderr.write(`${line} (said once)\n`)
  })
}

/** Ends the client, and says nothing when its connection has gone already. */
export const endQuietly = (client: pg.Client): Promise<void> => client.end().catch(() => undefined)
