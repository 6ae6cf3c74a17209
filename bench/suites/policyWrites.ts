import { defaults as defaultPolicy } from "../../src/Domain/PolicyCatalog.js"
import { bearer, expectStatus, send } from "../lib/fixtures.js"
import type { ConnectionRequests, HttpRequestSpec, Runner } from "../lib/load.js"
import { runRound } from "../lib/load.js"

/**
 * The policy write under load: each connection writes the policy of an account of its own, so
 * writers never race, and each write carries the version the service last gave that account, so
 * none is stale: D5's 409 `version_conflict` is the service's right answer to a harness that lost
 * its place, and a round that gets one fails.
 */

export const POLICY_PATH = "/developer/account/policy"

/** All twelve fields, valid, and different from the last write, so every write changes the stored policy. */
const policyWrite = (token: string, expectedVersion: number): HttpRequestSpec => ({
  method: "PUT",
  path: POLICY_PATH,
  headers: { ...bearer(token), "content-type": "application/json" },
  body: JSON.stringify({
    policy: { ...defaultPolicy, force_push: expectedVersion % 2 === 0 ? "deny" : "ask" },
    expected_version: expectedVersion
  })
})

const policyRead = (token: string): HttpRequestSpec => ({ method: "GET", path: POLICY_PATH, headers: bearer(token) })

/** The `version` of a policy record (what a read and a successful write answer), if the body is one. */
const versionIn = (body: string): number | undefined => {
  try {
    const parsed: unknown = JSON.parse(body)
    return typeof parsed === "object" && parsed !== null && "version" in parsed && typeof parsed.version === "number"
      ? parsed.version
      : undefined
  } catch {
    return undefined
  }
}

const policyVersion = async (baseUrl: string, token: string): Promise<number> => {
  const { version } = expectStatus(await send(baseUrl, policyRead(token)), 200, `GET ${POLICY_PATH}`)
  if (typeof version !== "number") throw new Error(`GET ${POLICY_PATH}: no version`)
  return version
}

/**
 * The account's version once no earlier write can still land. A round ends by dropping its
 * connections, and a write cut off that way may still be applied after a read of the version
 * (the service finishes what it has begun), so a read alone can be one behind. A write of our
 * own settles it: once it succeeds, any write still in flight carries an older version and can
 * only be refused. It is not measured.
 */
const settledVersion = async (baseUrl: string, token: string): Promise<number> => {
  for (let attempt = 1; attempt <= 5; attempt++) {
    const answer = await send(baseUrl, policyWrite(token, await policyVersion(baseUrl, token)))
    if (answer.status === 200) {
      const { version } = expectStatus(answer, 200, `PUT ${POLICY_PATH}`)
      if (typeof version === "number") return version
    }
    if (answer.status !== 409) break // 409: a late write landed first; read again
  }
  throw new Error(`PUT ${POLICY_PATH}: could not settle an account's version before a round`)
}

/**
 * One account's writes on one connection. Each carries the version the service's last answer
 * gave (a 200's `version`), not a count of successes. A write whose answer was lost (autocannon
 * re-opened the connection) may or may not have been applied, so the connection then reads the
 * version, unmeasured, before it writes again.
 */
export const accountWriter = (token: string, version: number) => {
  let known = version
  let lastWasWrite = false
  const counts = { writes: 0, lost: 0 }
  const requests: ConnectionRequests = {
    next: (previousUnanswered) => {
      if (previousUnanswered) counts.lost += 1
      lastWasWrite = !previousUnanswered
      return previousUnanswered
        ? { request: policyRead(token), measured: false }
        : { request: policyWrite(token, known), measured: true }
    },
    answered: (status, body) => {
      const answered = versionIn(body)
      if (status === 200 && answered !== undefined) known = answered
      if (status === 200 && lastWasWrite) counts.writes += 1
    }
  }
  return { requests, counts }
}

/**
 * Policy writes at `options.connections` connections, an account (a token) per connection.
 * After the round the stored versions must account for every write answered 200, plus at most
 * one write per connection cut off at the end and every write whose answer was lost.
 */
export const policyWriteRunner = (
  baseUrl: string,
  tokens: ReadonlyArray<string>,
  cpuSeconds?: () => number | undefined
): Runner => ({
  name: "api",
  round: async (options) => {
    const own = tokens.slice(0, options.connections)
    const [firstToken] = own
    if (own.length < options.connections || firstToken === undefined) {
      throw new Error(`${options.connections} connections need as many accounts; there are ${tokens.length}`)
    }
    const before = await Promise.all(own.map((token) => settledVersion(baseUrl, token)))
    const writers = own.map((token, index) => accountWriter(token, before[index] ?? 0))
    const figures = await runRound({
      name: "api",
      baseUrl,
      request: policyWrite(firstToken, before[0] ?? 0),
      ...(cpuSeconds === undefined ? {} : { cpuSeconds }),
      perConnection: (connection) => {
        const writer = writers[connection]
        if (writer === undefined) throw new Error(`no account for connection ${connection}`)
        return writer.requests
      }
    }, options)
    const after = await Promise.all(own.map((token) => policyVersion(baseUrl, token)))
    const applied = after.reduce((sum, version, index) => sum + version - (before[index] ?? 0), 0)
    const lost = writers.reduce((sum, writer) => sum + writer.counts.lost, 0)
    if (applied < figures.requests || applied > figures.requests + lost + options.connections) {
      throw new Error(
        `PUT ${POLICY_PATH}: ${figures.requests} writes answered 200 (${lost} answers lost) but the versions moved by ${applied}`
      )
    }
    return figures
  }
})
