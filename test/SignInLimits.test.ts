import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { DateTime, Deferred, Effect, Fiber, Option } from "effect"
import { LIVE_SIGN_INS } from "../src/Auth.js"
import { SignInsRepo } from "../src/Auth/Repo.js"
import { waitFor } from "./support/processes.js"
import { call, createUser, PASSWORD, type Reply, TestApp } from "./support/TestApp.js"

/**
 * Sign-in floods and proxies (issue 22.3, 22.4), as the attack read made them: one user signing
 * in without pause, 100 failures for made-up emails from one address behind the load balancer,
 * and clients that send `X-Forwarded-For` themselves.
 */

const login = (email: string, password: string, forwardedFor?: string) =>
  call("POST", "/auth/login", {
    body: { email, password },
    ...(forwardedFor === undefined ? {} : { headers: { "x-forwarded-for": forwardedFor } })
  })

const tokenOf = (reply: Reply) => String((reply.body as { readonly access_token: string }).access_token)

/** Five wrong passwords for `email` from `forwardedFor`: the (email, address) counter at its limit (D2). */
const fiveFailures = (email: string, forwardedFor: string) =>
  Effect.forEach(
    Array.from({ length: 5 }),
    () => Effect.map(login(email, "wrong password here", forwardedFor), (reply) => expect(reply.status).toBe(401))
  )

/** A user's sign-ins by state: live (not revoked, not expired) and revoked. */
const signInStates = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly live: string; readonly revoked: string }>`
      SELECT count(*) FILTER (WHERE revoked_at IS NULL AND expires_at > now())::text AS live,
             count(*) FILTER (WHERE revoked_at IS NOT NULL)::text AS revoked
      FROM auth_sessions WHERE user_id = ${userId}`.pipe(Effect.orDie),
      (rows) => rows[0]
    ))

const expectRateLimited = (reply: Reply) => {
  expect(reply.status).toBe(429)
  expect(reply.body).toMatchObject({ code: "rate_limited" })
  expect(reply.headers["retry-after"]).toMatch(/^\d+$/)
}

layer(TestApp({ TRUSTED_PROXIES: "127.0.0.1,::1" }), { excludeTestServices: true })(
  "sign-in behind a listed proxy (issue 22.3, 22.4)",
  (it) => {
    describe("successful sign-ins are limited too (22.3)", () => {
      it.effect(
        "a flood of correct sign-ins by one user is 429 past 30 in 15 minutes; another user signs in",
        () =>
          Effect.gen(function*() {
            const flooder = yield* createUser()
            const other = yield* createUser()
            const replies = yield* Effect.forEach(
              Array.from({ length: 40 }),
              () => login(flooder.email, PASSWORD, "203.0.113.10"),
              { concurrency: 4 }
            )
            expect(replies.filter((reply) => reply.status === 200).length).toBe(30)
            for (const reply of replies.filter((reply) => reply.status !== 200)) expectRateLimited(reply)
            // From the same client and from another, the other user is not held up by the flood.
            expect((yield* login(other.email, PASSWORD, "203.0.113.10")).status).toBe(200)
            expect((yield* login(other.email, PASSWORD, "203.0.113.11")).status).toBe(200)
          }),
        120_000
      )
    })

    describe("one address behind a proxy locks no one out (22.4)", () => {
      it.effect(
        "after 100 failures for made-up emails from one client, a real user's password still gets in",
        () =>
          Effect.gen(function*() {
            const user = yield* createUser()
            const replies = yield* Effect.forEach(
              Array.from({ length: 100 }, (_, i) => `nobody${i}.${user.id}@example.com`),
              (email) => login(email, "guessed password", "198.51.100.7"),
              { concurrency: 4 }
            )
            expect(replies.map((reply) => reply.status)).toEqual(replies.map(() => 401))
            // The address is at its limit: a made-up email is refused, the real user's password gets in.
            expectRateLimited(yield* login(`nobody-more.${user.id}@example.com`, "guessed password", "198.51.100.7"))
            expect((yield* login(user.email, PASSWORD, "198.51.100.7")).status).toBe(200)
            // A wrong password for them from that address is refused as rate-limited, not checked as a 401.
            expectRateLimited(yield* login(user.email, "not the password", "198.51.100.7"))
          }),
        120_000
      )

      it.effect(
        "clients behind the proxy are counted apart, by the right-most hop the proxy did not add",
        () =>
          Effect.gen(function*() {
            const user = yield* createUser()
            yield* fiveFailures(user.email, "203.0.113.20")
            expectRateLimited(yield* login(user.email, PASSWORD, "203.0.113.20"))
            // What the client itself wrote further left changes nothing.
            expectRateLimited(yield* login(user.email, PASSWORD, "192.0.2.99, 203.0.113.20"))
            expect((yield* login(user.email, PASSWORD, "203.0.113.21")).status).toBe(200)
          }),
        60_000
      )

      it.effect("IPv6 clients are counted by their /64", () =>
        Effect.gen(function*() {
          const user = yield* createUser()
          yield* fiveFailures(user.email, "2001:db8:1:2::1")
          expectRateLimited(yield* login(user.email, PASSWORD, "2001:db8:1:2:ffff:ffff:ffff:ffff"))
          expect((yield* login(user.email, PASSWORD, "2001:db8:1:3::1")).status).toBe(200)
        }), 60_000)
    })
  }
)

layer(TestApp(), { excludeTestServices: true })("sign-in with no proxy listed (issue 22.4)", (it) => {
  it.effect("a peer that is not a listed proxy has its X-Forwarded-For ignored", () =>
    Effect.gen(function*() {
      const user = yield* createUser()
      yield* fiveFailures(user.email, "192.0.2.1")
      expectRateLimited(yield* login(user.email, PASSWORD, "192.0.2.2"))
    }), 60_000)
})

layer(TestApp({ SIGN_INS_PER_EMAIL: "100" }), { excludeTestServices: true })(
  "live sign-ins per user and pruning (issue 22.3)",
  (it) => {
    it.effect(
      "the 51st live sign-in ends the oldest: its token gets 401, the others still work",
      () =>
        Effect.gen(function*() {
          const user = yield* createUser()
          const tokens: Array<string> = []
          for (let i = 0; i < 51; i++) {
            const reply = yield* login(user.email, PASSWORD)
            expect(reply.status).toBe(200)
            tokens.push(tokenOf(reply))
          }
          const [oldest = "", second = ""] = tokens
          // A revocation reaches this process's memory of sign-ins as every revocation does.
          const ended = (which: string, token: string) =>
            waitFor(
              `the ${which} sign-in's token answers 401`,
              Effect.map(
                call("GET", "/auth/me", { token }),
                (reply) => reply.status === 401 ? Option.some(reply) : Option.none()
              ),
              { limit: "10 seconds" }
            )
          yield* ended("oldest", oldest)
          expect((yield* call("GET", "/auth/me", { token: second })).status).toBe(200)
          expect((yield* call("GET", "/auth/me", { token: tokens[50] ?? "" })).status).toBe(200)
          const byState = signInStates(user.id)
          // The sign-in it revoked is deleted at the user's next one (D2).
          expect(yield* byState).toEqual({ live: "50", revoked: "1" })
          expect((yield* login(user.email, PASSWORD)).status).toBe(200)
          expect(yield* byState).toEqual({ live: "50", revoked: "1" })
          yield* ended("second", second)
        }),
      120_000
    )

    it.effect(
      "sign-ins of one user at once still leave 50 live (D2)",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const user = yield* createUser()
          // 48 live already: five sign-ins take the user to 53, three past the 50 kept.
          yield* sql`
          INSERT INTO auth_sessions (user_id, expires_at)
          SELECT ${user.id}, now() + interval '1 day' FROM generate_series(1, 48)`
          // Those rows held by a transaction of the test's own: every sign-in that would end one
          // waits, so they overlap whatever the order they arrive in.
          const held = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
            yield* sql`SELECT id FROM auth_sessions WHERE user_id = ${user.id} FOR UPDATE`
            yield* Deferred.succeed(held, undefined)
            yield* Deferred.await(release)
          })))
          yield* Deferred.await(held)
          // Five: as many as the (email, address) counter lets in at once (an attempt counts until it succeeds).
          const signIns = yield* Effect.fork(Effect.all(
            Array.from({ length: 5 }, () => login(user.email, PASSWORD)),
            { concurrency: "unbounded" }
          ))
          // The third sign-in on is past 50 whenever it comes: at least three wait on the held rows.
          yield* waitFor(
            "three sign-ins waiting on the held rows",
            Effect.map(
              sql<{ readonly waiting: number }>`
              SELECT count(*)::int AS waiting FROM pg_stat_activity
              WHERE datname = current_database() AND wait_event_type = 'Lock'`,
              ([row]) => (row?.waiting ?? 0) >= 3 ? Option.some(row) : Option.none()
            ),
            { limit: "20 seconds" }
          )
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(holder)
          const replies = yield* Fiber.join(signIns)
          expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200])
          // Each sign-in's row is written before the statement that ends what it displaces, so the
          // last of those statements to begin counts all five (D2).
          expect((yield* signInStates(user.id))?.live).toBe("50")
        }).pipe(Effect.orDie),
      60_000
    )

    it.effect(
      "sign-ins of two users retiring the same rows at once all succeed, and each user keeps 50 live (D2)",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const signIns = yield* SignInsRepo
          const users = [yield* createUser(), yield* createUser()]
          // What a sign-in writes after the password's check, eight at a time without pause: the users'
          // sign-ins beyond 50 and the expired ones (anyone's) are retired by several statements at once.
          const signInAgain = (userId: string, round: number) =>
            Effect.gen(function*() {
              const now = yield* DateTime.now
              yield* signIns.insert({ user_id: userId, expires_at: DateTime.add(now, { days: 1 }) })
              if (round % 10 === 0) {
                yield* sql`
                INSERT INTO auth_sessions (user_id, expires_at)
                SELECT ${userId}, now() - interval '1 minute' FROM generate_series(1, 5)`
              }
              yield* signIns.retire({ user_id: userId, keep: LIVE_SIGN_INS, batch: 100 })
            })
          const failures = yield* Effect.forEach(
            Array.from({ length: 8 }, (_, runner) => users[runner % 2]?.id ?? ""),
            (userId) =>
              Effect.forEach(Array.from({ length: 60 }, (_, round) => round), (round) =>
                signInAgain(userId, round).pipe(
                  Effect.as(undefined),
                  // A statement's failure, with PostgreSQL's own words ("deadlock detected").
                  Effect.catchAllDefect((defect) =>
                    Effect.succeed(
                      defect instanceof Error && defect.cause instanceof Error
                        ? `${defect.message}: ${defect.cause.message}`
                        : String(defect)
                    )
                  )
                )),
            { concurrency: "unbounded" }
          )
          expect(failures.flat().filter((failure) => failure !== undefined)).toEqual([])
          for (const user of users) expect((yield* signInStates(user.id))?.live).toBe(String(LIVE_SIGN_INS))
        }).pipe(Effect.provide(SignInsRepo.Default), Effect.orDie),
      60_000
    )

    it.effect(
      "a sign-in deletes expired sign-ins and the user's revoked ones, not live ones",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const user = yield* createUser()
          const bystander = yield* createUser()
          yield* sql`
          INSERT INTO auth_sessions (user_id, expires_at, revoked_at)
          SELECT ${user.id}, now() + interval '1 day', now() FROM generate_series(1, 30)`
          yield* sql`
          INSERT INTO auth_sessions (user_id, expires_at)
          SELECT ${bystander.id}, now() - interval '1 minute' FROM generate_series(1, 20)`
          yield* sql`INSERT INTO auth_sessions (user_id, expires_at) VALUES (${bystander.id}, now() + interval '1 day')`
          expect((yield* login(user.email, PASSWORD)).status).toBe(200)
          const rows = yield* sql<{ readonly user_id: string; readonly state: string; readonly n: string }>`
          SELECT user_id, CASE WHEN revoked_at IS NOT NULL THEN 'revoked'
                               WHEN expires_at <= now() THEN 'expired' ELSE 'live' END AS state,
                 count(*)::text AS n
          FROM auth_sessions WHERE user_id IN (${user.id}, ${bystander.id})
          GROUP BY 1, 2 ORDER BY 1, 2`
          expect(rows.map((row) => [row.user_id === user.id ? "user" : "bystander", row.state, row.n]).sort())
            .toEqual([["bystander", "live", "1"], ["user", "live", "1"]])
        }).pipe(Effect.orDie),
      60_000
    )
  }
)
