import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import { Accounts } from "../src/Accounts.js"
import { Credentials } from "../src/Auth/Credentials.js"
import { DatabaseLive } from "../src/Sql.js"
import { Wallets } from "../src/Wallets.js"
import { createOrganisation, createRepository } from "./support/policies.js"
import { TestConfig } from "./support/TestApp.js"
import { newAccount } from "./support/TestSettlement.js"

/**
 * Who owns a repository or a user (D16's attribution), as the settlement batch asks: found
 * owners are kept in memory, so the answers must be the same whether an id was known before,
 * is new, or comes in another case.
 */

const TestAccounts = Layer.mergeAll(Accounts.Default, Credentials.Default, Wallets.Default).pipe(
  Layer.provideMerge(DatabaseLive),
  Layer.provideMerge(TestConfig())
)

layer(TestAccounts, { excludeTestServices: true })("owners of repositories and users (D16)", (it) => {
  describe("findOwners", () => {
    it.effect("answers ids known before and new ones alike, in any case; an unknown id has no owner", () =>
      Effect.gen(function*() {
        const accounts = yield* Accounts
        const organisation = yield* createOrganisation()
        const ownAccount = yield* newAccount()
        const first = yield* createRepository(organisation)
        const asked = yield* accounts.findOwners({ repositoryIds: [first], userIds: [ownAccount.id] })
        expect(asked.owner("repository", first)).toMatchObject({ kind: "client", id: organisation })
        expect(asked.owner("user", ownAccount.id)).toMatchObject({ kind: "user", id: ownAccount.id })

        // One known (asked in upper case), one new, one not an owner of anything yet.
        const second = yield* createRepository(ownAccount.id)
        const later = randomUUID()
        const mixed = yield* accounts.findOwners({
          repositoryIds: [first.toUpperCase(), second, later, "not-a-uuid"],
          userIds: [ownAccount.id]
        })
        expect(mixed.owner("repository", first)).toMatchObject({ kind: "client", id: organisation })
        expect(mixed.owner("repository", second)).toMatchObject({ kind: "user", id: ownAccount.id })
        expect(mixed.owner("user", ownAccount.id)).toMatchObject({ kind: "user", id: ownAccount.id })
        expect(mixed.owner("repository", later)).toBeUndefined()
        expect(mixed.owner("repository", "not-a-uuid")).toBeUndefined()
        // A repository id is not a user id: the kinds are told apart.
        expect(mixed.owner("user", first)).toBeUndefined()

        // A repository made after the others were remembered is found when first asked for.
        const made = yield* accounts.createRepository(ownAccount.id, `repo-${randomUUID().slice(0, 6)}`)
        const again = yield* accounts.findOwners({ repositoryIds: [made.id], userIds: [] })
        expect(again.owner("repository", made.id)).toMatchObject({ kind: "user", id: ownAccount.id })
      }).pipe(Effect.orDie))
  })
})
