import Fastify from "fastify"
import pg from "pg"
import { makeAuthenticate } from "./auth.js"
import { routes } from "./routes.js"

/**
 * The baseline: fastify and pg, no Effect, answering the routes in
 * `routes.ts` with the service's SQL. The bench measures the service against
 * it in the same run; it is not part of the service.
 */

const required = (name: string): string => {
  const value = process.env[name]
  if (value === undefined || value === "") throw new Error(`${name} is required`)
  return value
}

// The service's pool settings (src/Sql.ts), so neither side has more connections to work with.
const pool = new pg.Pool({
  connectionString: required("DATABASE_URL"),
  max: 20,
  idleTimeoutMillis: 60_000,
  connectionTimeoutMillis: 5_000,
  application_name: "account-api-baseline"
})
// An idle connection the server ends (the run's database dropped at clean-up) must not crash the baseline.
pool.on("error", (error) => process.stderr.write(`baseline pool: ${error.message}\n`))
const authenticate = await makeAuthenticate(pool, required("AUTH_SECRET"))

const unauthenticated = {
  type: "about:blank",
  title: "Unauthorized",
  status: 401,
  code: "unauthenticated",
  detail: "Sign in again."
}

const app = Fastify({ logger: false })

app.get("/readyz", async () => {
  await pool.query("SELECT 1")
  return { status: "ready" }
})

for (const route of routes) {
  app.route<{ Querystring: Record<string, string | undefined> }>({
    method: route.method,
    url: route.url,
    handler: async (request, reply) => {
      const caller = await authenticate(request.headers.authorization)
      if (caller === undefined) {
        return reply.code(401).header("www-authenticate", "Bearer").type("application/problem+json").send(
          unauthenticated
        )
      }
      return route.handle({ caller, pool, query: request.query, body: request.body })
    }
  })
}

const shutdown = () => {
  app.close().then(() => pool.end()).then(() => process.exit(0), () => process.exit(1))
}
process.once("SIGTERM", shutdown)
process.once("SIGINT", shutdown)

await app.listen({ port: Number(required("PORT")), host: "127.0.0.1" })
