import { describe, expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Credentials } from "../src/Auth/Credentials.js"
import { createOrganisation, createRepository, putOverride } from "./support/policies.js"
import { call, PASSWORD, signIn, TestApp } from "./support/TestApp.js"

/**
 * The account's directory (D23, docs/decisions/D23-directory.md): repositories and members by
 * name then id, `q` a case-insensitive substring, pages as the event pull's, email for
 * administrators only; another account's rows never show.
 */

let made = 0

/** A user named `name`, as the CLI makes one; in the organisation when given. */
const person = (name: string, options: { readonly organisationId?: string; readonly admin?: boolean } = {}) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const email = `directory${++made}.${Math.random().toString(36).slice(2, 8)}@example.com`
    const user = yield* credentials.createUser({
      email,
      name,
      isAdmin: options.admin ?? false,
      isOperator: false,
      organisationId: Option.fromNullable(options.organisationId),
      password: PASSWORD
    })
    return { id: user.id, email, name, token: yield* signIn(email) }
  }).pipe(Effect.orDie)

interface Page<A> {
  readonly next_after: string | null
  readonly [key: string]: ReadonlyArray<A> | string | null
}
type Repository = { id: string; name: string; has_policy_override: boolean; created_at: string }
type Member = { id: string; name: string; is_admin: boolean; disabled: boolean; email?: string }

const get = <A>(path: string, token: string) =>
  Effect.map(call("GET", path, { token }), (reply) => ({ ...reply, page: reply.body as Page<A> }))

layer(TestApp(), { excludeTestServices: true })("the account's directory (D23)", (it) => {
  describe("GET /developer/account/repositories", () => {
    it.effect("lists the account's repositories by name then id, with whether each has an override", () =>
      Effect.gen(function*() {
        const org = yield* createOrganisation("Directory Org")
        const admin = yield* person("Ada", { organisationId: org, admin: true })
        const member = yield* person("Bob", { organisationId: org })
        const web = yield* createRepository(org, "web")
        const api = yield* createRepository(org, "API")
        const tools = yield* createRepository(org, "tools")
        const other = yield* createOrganisation("Elsewhere")
        yield* createRepository(other, "web-elsewhere")
        const saved = yield* putOverride(admin.token, tools, { force_push: "deny" })
        expect(saved.status).toBe(200)

        const reply = yield* get<Repository>("/developer/account/repositories", member.token)
        expect(reply.status).toBe(200)
        const listed = reply.page["repositories"] as ReadonlyArray<Repository>
        // By name (the database's collation) then id: each name once, in the server's order.
        expect(listed.map((repository) => repository.id).sort()).toEqual([api, tools, web].sort())
        expect(listed.map((repository) => repository.name)).toEqual(
          [...listed.map((repository) => repository.name)].sort((a, b) => a.localeCompare(b))
        )
        expect(listed.find((repository) => repository.id === tools)?.has_policy_override).toBe(true)
        expect(listed.find((repository) => repository.id === web)?.has_policy_override).toBe(false)
        expect(Object.keys(listed[0] ?? {}).sort()).toEqual(["created_at", "has_policy_override", "id", "name"])
        expect(reply.page.next_after).toBeNull()

        const found = yield* get<Repository>("/developer/account/repositories?q=WE", member.token)
        expect((found.page["repositories"] as ReadonlyArray<Repository>).map((repository) => repository.id)).toEqual([
          web
        ])
      }))

    it.effect("pages by after and limit, each row once, and an after not of the account is 404", () =>
      Effect.gen(function*() {
        const org = yield* createOrganisation("Paged Org")
        const member = yield* person("Cy", { organisationId: org })
        const ids = []
        for (const name of ["a", "b", "b", "c", "d"].map((name, index) => `${name}-${index}`)) {
          ids.push(yield* createRepository(org, name))
        }
        const seen: Array<string> = []
        let after: string | null = null
        let pages = 0
        do {
          const reply: { readonly page: Page<Repository>; readonly status: number } = yield* get<Repository>(
            `/developer/account/repositories?limit=2${after === null ? "" : `&after=${after}`}`,
            member.token
          )
          expect(reply.status).toBe(200)
          const rows = reply.page["repositories"] as ReadonlyArray<Repository>
          seen.push(...rows.map((row) => row.id))
          after = reply.page.next_after
          pages += 1
        } while (after !== null && pages < 10)
        expect(pages).toBe(3)
        expect(seen).toEqual(ids)

        const elsewhere = yield* createRepository(yield* createOrganisation("Not theirs"), "z")
        for (const bad of [elsewhere, "not-an-id"]) {
          const reply = yield* call("GET", `/developer/account/repositories?after=${bad}`, { token: member.token })
          expect(reply.status).toBe(404)
          expect(reply.body).toMatchObject({ code: "repository_not_found" })
        }
      }))

    it.effect("q must be 1 to 100 characters: otherwise 422 at #/query/q", () =>
      Effect.gen(function*() {
        const user = yield* person("Dee")
        for (const q of ["", "x".repeat(101)]) {
          const reply = yield* call("GET", `/developer/account/repositories?q=${q}`, { token: user.token })
          expect(reply.status, `q of ${q.length}`).toBe(422)
          expect(reply.body).toMatchObject({ code: "validation_failed", errors: [{ pointer: "#/query/q" }] })
          const members = yield* call("GET", `/developer/account/members?q=${q}`, { token: user.token })
          expect(members.status).toBe(422)
          expect(members.body).toMatchObject({ errors: [{ pointer: "#/query/q" }] })
        }
        const unsigned = yield* call("GET", "/developer/account/repositories")
        expect(unsigned.status).toBe(401)
      }))
  })

  describe("GET /developer/account/members", () => {
    it.effect("lists the organisation's people by name then id; email only in an administrator's read", () =>
      Effect.gen(function*() {
        const org = yield* createOrganisation("People Org")
        const zed = yield* person("Zed", { organisationId: org, admin: true })
        const amy = yield* person("amy", { organisationId: org })
        const mo = yield* person("Mo", { organisationId: org })
        yield* person("Outsider", { organisationId: yield* createOrganisation("Other people") })
        const credentials = yield* Credentials
        yield* Effect.orDie(credentials.disableUser(mo.email))

        const asMember = yield* get<Member>("/developer/account/members", amy.token)
        expect(asMember.status).toBe(200)
        const members = asMember.page["members"] as ReadonlyArray<Member>
        expect(members.map((one) => one.id).sort()).toEqual([zed.id, amy.id, mo.id].sort())
        expect(members.every((one) => !("email" in one))).toBe(true)
        expect(members.find((one) => one.id === zed.id)).toEqual({
          id: zed.id,
          name: "Zed",
          is_admin: true,
          disabled: false
        })
        expect(members.find((one) => one.id === mo.id)?.disabled).toBe(true)

        const asAdmin = yield* get<Member>("/developer/account/members", zed.token)
        const withEmail = asAdmin.page["members"] as ReadonlyArray<Member>
        expect(withEmail.find((one) => one.id === amy.id)?.email).toBe(amy.email)
        expect(withEmail.map((one) => one.id)).toEqual(members.map((one) => one.id))

        const found = yield* get<Member>("/developer/account/members?q=AM", zed.token)
        expect((found.page["members"] as ReadonlyArray<Member>).map((one) => one.id)).toEqual([amy.id])

        const first = yield* get<Member>("/developer/account/members?limit=1", zed.token)
        const firstRows = first.page["members"] as ReadonlyArray<Member>
        expect(firstRows.map((one) => one.id)).toEqual([withEmail[0]?.id])
        expect(first.page.next_after).toBe(withEmail[0]?.id)
        const second = yield* get<Member>(
          `/developer/account/members?limit=1&after=${first.page.next_after}`,
          zed.token
        )
        expect((second.page["members"] as ReadonlyArray<Member>).map((one) => one.id)).toEqual([withEmail[1]?.id])

        const stranger = yield* call("GET", `/developer/account/members?after=${zed.id}`, {
          token: (yield* person("Lone")).token
        })
        expect(stranger.status).toBe(404)
        expect(stranger.body).toMatchObject({ code: "member_not_found" })
      }))

    it.effect("a personal account lists its one user", () =>
      Effect.gen(function*() {
        const user = yield* person("Solo")
        const reply = yield* get<Member>("/developer/account/members", user.token)
        expect(reply.page["members"]).toEqual([{ id: user.id, name: "Solo", is_admin: false, disabled: false }])
        expect(reply.page.next_after).toBeNull()
        const repositories = yield* get<Repository>("/developer/account/repositories", user.token)
        expect(repositories.page["repositories"]).toEqual([])
      }))
  })
})
