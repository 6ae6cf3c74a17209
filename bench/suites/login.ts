import { hash, verify } from "@node-rs/argon2"
import { availableParallelism } from "node:os"
import { ARGON2_OPTIONS } from "../../src/Auth/Passwords.js"
import { createUsers } from "../lib/fixtures.js"
import { compareRounds, figuresOf, httpRunner, pairedRatio, type RoundFigures, type Runner } from "../lib/load.js"
import { percentile } from "../lib/stats.js"
import type { Suite } from "../lib/suite.js"

const CONNECTIONS = 16
/** libuv's pool runs the hashing; its size bounds how many run at once (4 unless set). */
const THREAD_POOL_SIZE = Number(process.env.UV_THREADPOOL_SIZE ?? 4)

/**
 * The ceiling: argon2id verifications alone, as many at once as the logins, in
 * this process. A sign-in cannot beat it; the gap is everything else a sign-in
 * does (throttle counters, user lookup, session insert, token signing, HTTP).
 */
const argon2Runner = (passwordHash: string, password: string): Runner => ({
  name: "argon2id verify",
  round: async ({ connections, durationSeconds }) => {
    const latencies: Array<number> = []
    const started = performance.now()
    const deadline = started + durationSeconds * 1000
    await Promise.all(Array.from({ length: connections }, async () => {
      while (performance.now() < deadline) {
        const begun = performance.now()
        if (!(await verify(passwordHash, password))) throw new Error("argon2id verify failed")
        latencies.push(performance.now() - begun)
      }
    }))
    const seconds = (performance.now() - started) / 1000
    return {
      rps: latencies.length / seconds,
      p50_ms: percentile(latencies, 0.5),
      p99_ms: percentile(latencies, 0.99),
      requests: latencies.length
    } satisfies RoundFigures
  }
})

/** Sign-ins per second at 16 connections, bounded by the argon2id cost stated with it. */
export const loginSuite: Suite = {
  name: "login",
  // Two contenders' rounds; the users' argon2id hashes first.
  plannedSeconds: (settings) => 2 * settings.rounds * settings.durationSeconds + settings.warmUpSeconds + 15,
  run: async ({ progress, settings, stack }) => {
    // A user per connection: sign-ins in flight count against one (email, address)'s limit of
    // five (D2), and the bench measures sign-in, not the limiter.
    const users = await createUsers(stack.databaseUrl, CONNECTIONS)
    const [user] = users
    if (user === undefined) throw new Error("no bench user")
    const signIn = (connection: number) => {
      const own = users[connection % users.length] ?? user
      return {
        method: "POST",
        path: "/auth/login",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: own.email, password: own.password })
      } as const
    }
    const parameters = {
      algorithm: "argon2id",
      memory_kib: ARGON2_OPTIONS.memoryCost,
      time_cost: ARGON2_OPTIONS.timeCost,
      parallelism: ARGON2_OPTIONS.parallelism,
      thread_pool: THREAD_POOL_SIZE,
      cpus: availableParallelism()
    }
    const request =
      `POST /auth/login (argon2id m=${parameters.memory_kib} KiB, t=${parameters.time_cost}, p=${parameters.parallelism})`
    const api = httpRunner({
      name: "api",
      baseUrl: stack.api.baseUrl,
      cpuSeconds: stack.api.cpuSeconds,
      request: signIn(0),
      perConnection: (connection) => ({
        next: () => ({ request: signIn(connection), measured: true }),
        answered: () => {}
      })
    })
    const ceiling = argon2Runner(await hash(user.password, ARGON2_OPTIONS), user.password)
    const rounds = await compareRounds([api, ceiling], {
      connections: CONNECTIONS,
      durationSeconds: settings.durationSeconds,
      rounds: settings.rounds,
      onRound: (name, round, figures) =>
        progress(`login round ${round} ${name}: ${figures.rps.toFixed(1)}/s, p99 ${figures.p99_ms.toFixed(0)} ms`)
    })
    const ofApi = rounds.get(api.name) ?? []
    const ofCeiling = rounds.get(ceiling.name) ?? []
    const vs = {
      reference: ceiling.name,
      rps: pairedRatio(ofApi, ofCeiling, "rps"),
      p99: pairedRatio(ofApi, ofCeiling, "p99_ms")
    }
    return {
      rows: [
        {
          suite: "login",
          request,
          server: api.name,
          connections: CONNECTIONS,
          ...figuresOf(ofApi),
          vs,
          parameters,
          rounds: ofApi
        },
        {
          suite: "login",
          request,
          server: ceiling.name,
          connections: CONNECTIONS,
          ...figuresOf(ofCeiling),
          parameters,
          rounds: ofCeiling
        }
      ],
      ratios: { login_vs_argon2_ceiling: vs.rps.median }
    }
  }
}
