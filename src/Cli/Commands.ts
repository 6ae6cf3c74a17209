import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { Accounts } from "../Accounts.js"
import { migrate } from "../Sql.js"

/** Every command answers with exactly one JSON object on stdout (D10). */
const print = (value: unknown) => Console.log(JSON.stringify(value))

/** Passwords come on stdin, never as arguments, which leak into shell history and `ps`. */
const readPassword = Effect.promise(async () => {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Uint8Array))
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "")
})

const migrateCommand = Command.make("migrate", {}, () =>
  Effect.flatMap(migrate, (applied) => print({ applied })))

const orgCreate = Command.make("create", { name: Options.text("name") }, ({ name }) =>
  Effect.flatMap(Accounts, (accounts) => accounts.createOrganisation(name)).pipe(
    Effect.flatMap(({ id }) => print({ id }))
  ))

const userCreate = Command.make("create", {
  email: Options.text("email"),
  name: Options.text("name"),
  admin: Options.boolean("admin"),
  operator: Options.boolean("operator").pipe(
    Options.withDescription("may open the queue dashboard, which shows every account's jobs (D9)")
  ),
  org: Options.text("org").pipe(Options.optional)
}, ({ admin, email, name, operator, org }) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const password = yield* readPassword
    const user = yield* accounts.createUser({
      email,
      name,
      isAdmin: admin,
      isOperator: operator,
      organisationId: org,
      password
    })
    yield* print({ id: user.id, email: user.email })
  }))

const userResetPassword = Command.make("reset-password", { email: Options.text("email") }, ({ email }) =>
  Effect.gen(function*() {
    const accounts = yield* Accounts
    const password = yield* readPassword
    const user = yield* accounts.resetPassword(email, password)
    yield* print({ id: user.id })
  }))

/** `user grant-operator` / `user revoke-operator`: the dashboard role, which only this CLI sets (D9). */
const userOperator = (name: "grant-operator" | "revoke-operator", isOperator: boolean) =>
  Command.make(name, { email: Options.text("email") }, ({ email }) =>
    Effect.flatMap(Accounts, (accounts) => accounts.setOperator(email, isOperator)).pipe(
      Effect.flatMap(({ id }) => print({ id }))
    )).pipe(
      Command.withDescription(
        isOperator
          ? "Let the user open the queue dashboard (every account's jobs)."
          : "Withdraw the user's access to the queue dashboard."
      )
    )

const repoCreate = Command.make("create", {
  account: Options.text("account"),
  name: Options.text("name")
}, ({ account, name }) =>
  Effect.flatMap(Accounts, (accounts) => accounts.createRepository(account, name)).pipe(
    Effect.flatMap(({ id }) => print({ id }))
  ))

/** The operator CLI (D10): `migrate`, `org create`, `user create`, `user reset-password`, `repo create`. */
export const cli = Command.make("account-api").pipe(
  Command.withSubcommands([
    migrateCommand,
    Command.make("org").pipe(Command.withSubcommands([orgCreate])),
    Command.make("user").pipe(Command.withSubcommands([
      userCreate,
      userResetPassword,
      userOperator("grant-operator", true),
      userOperator("revoke-operator", false)
    ])),
    Command.make("repo").pipe(Command.withSubcommands([repoCreate]))
  ]),
  Command.run({ name: "account-api", version: "0.1.0" })
)
