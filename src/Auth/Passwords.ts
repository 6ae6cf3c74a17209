import { hash, verify } from "@node-rs/argon2"
import { Effect } from "effect"
import { availableParallelism } from "node:os"

/**
 * argon2id with the OWASP baseline (19 MiB, 2 passes, 1 lane). The hashing runs
 * on libuv's thread pool, off the event loop.
 */
// `Algorithm` is a const enum, which isolated modules cannot read; 2 is its Argon2id.
const ARGON2ID = 2
/** Exported so the login benchmark states, and measures against, the cost actually in force. */
export const ARGON2_OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const

export class Passwords extends Effect.Service<Passwords>()("Auth/Passwords", {
  effect: Effect.gen(function*() {
    // A hash keeps a core busy and holds 19 MiB. More at once than there are cores finishes none
    // sooner; it holds more memory and fills the thread pool that token checks also wait on.
    // Once started it cannot be stopped, so it keeps its permit until it ends even when the
    // request is interrupted (a client hanging up): released early, it let the next waiters
    // start theirs beside it, 7 hashes and 133 MiB at once when 16 sign-ins hung up together.
    const cores = yield* Effect.makeSemaphore(availableParallelism())
    const argon2 = <A>(run: () => Promise<A>) => cores.withPermits(1)(Effect.uninterruptible(Effect.promise(run)))

    // Checked against when the email is unknown, so both failures cost the same time (D2).
    const dummyHash = yield* argon2(() => hash("not-a-password", ARGON2_OPTIONS))

    const hashPassword = (password: string) => argon2(() => hash(password, ARGON2_OPTIONS))

    /** `null` stands for "no such user": the dummy hash is checked and the answer is false. */
    const verifyPassword = (passwordHash: string | null, password: string) =>
      argon2(() => verify(passwordHash ?? dummyHash, password).catch(() => false)).pipe(
        Effect.map((ok) => ok && passwordHash !== null)
      )

    return { hashPassword, verifyPassword } as const
  })
}) {}
