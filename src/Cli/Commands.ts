import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { Accounts } from "../Accounts.js"
import { Credentials } from "../Auth/Credentials.js"
import { Books, BooksError } from "../Books.js"
import { BooksDrift } from "../Books/Drift.js"
import { migrate } from "../Sql.js"

/** Every command answers with exactly one JSON object on stdout (D10). */
const print = (value: unknown) => Console.log(JSON.stringify(value))

/** Passwords come on stdin, never as arguments, which leak into shell history and `ps`. */
const readPassword = Effect.promise(async () => {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk as Uint8Array))
  return Buffer.concat(chunks).toString("utf8").replace(/\r?\n$/, "")
})

const PASSWORD_ON_STDIN = "The password is read from standard input (at least 12 characters), never from an argument."

const email = Options.text("email").pipe(Options.withDescription("the user's email address (any case)"))
const accountId = Options.text("account").pipe(
  Options.withDescription("the account's id: an organisation's id, or the id of a user in no organisation")
)

/** `{ "id": … }` for a command that changes one thing. */
const printId = ({ id }: { readonly id: string }) => print({ id })

const migrateCommand = Command.make("migrate", {}, () => Effect.flatMap(migrate, (applied) => print({ applied }))).pipe(
  Command.withDescription("Apply the database migrations not applied yet; prints {\"applied\": [names]}.")
)

const orgCreate = Command.make(
  "create",
  {
    name: Options.text("name").pipe(Options.withDescription("the organisation's name"))
  },
  ({ name }) => Effect.flatMap(Accounts, (accounts) => accounts.createOrganisation(name)).pipe(Effect.flatMap(printId))
).pipe(
  Command.withDescription("Create an organisation (an account its members share); prints {\"id\"}.")
)

const orgList = Command.make("list", {}, () =>
  Effect.flatMap(Accounts, (accounts) => accounts.listOrganisations).pipe(
    Effect.flatMap((orgs) => print({ orgs: orgs.map((org) => ({ ...org, created_at: org.created_at.toISOString() })) }))
  )).pipe(Command.withDescription("List every organisation; prints {\"orgs\": [{\"id\", \"name\", \"created_at\"}]}."))

const userCreate = Command.make("create", {
  email,
  name: Options.text("name").pipe(Options.withDescription("the user's display name")),
  admin: Options.boolean("admin").pipe(Options.withDescription("an administrator of their account (may add credit)")),
  operator: Options.boolean("operator").pipe(
    Options.withDescription("may open the queue dashboard, which shows every account's jobs (D9)")
  ),
  org: Options.text("org").pipe(
    Options.withDescription("the organisation to join (its id); without it the user is an account of their own"),
    Options.optional
  )
}, ({ admin, email, name, operator, org }) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const password = yield* readPassword
    const user = yield* credentials.createUser({
      email,
      name,
      isAdmin: admin,
      isOperator: operator,
      organisationId: org,
      password
    })
    yield* print({ id: user.id, email: user.email })
  })).pipe(Command.withDescription(`Create a user; prints {"id", "email"}. ${PASSWORD_ON_STDIN}`))

const userList = Command.make(
  "list",
  {
    org: Options.text("org").pipe(
      Options.withDescription("only the members of this organisation (its id)"),
      Options.optional
    )
  },
  ({ org }) =>
    Effect.flatMap(Accounts, (accounts) => accounts.listUsers(org)).pipe(Effect.flatMap((users) => print({ users })))
).pipe(
  Command.withDescription(
    "List users; prints {\"users\": [{\"id\", \"email\", \"name\", \"is_admin\", \"is_operator\", \"org_id\", \"disabled\"}]}."
  )
)

const userResetPassword = Command.make("reset-password", { email }, ({ email }) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const password = yield* readPassword
    yield* printId(yield* credentials.resetPassword(email, password))
  })).pipe(
    Command.withDescription(`Set a new password and end every sign-in of the user; prints {"id"}. ${PASSWORD_ON_STDIN}`)
  )

const userDisable = Command.make(
  "disable",
  { email },
  ({ email }) =>
    Effect.flatMap(Credentials, (credentials) => credentials.disableUser(email)).pipe(Effect.flatMap(printId))
).pipe(
  Command.withDescription(
    "Disable a user: every sign-in ends, and signing in answers 401 invalid_credentials until enabled; prints {\"id\"}."
  )
)

const userEnable = Command.make(
  "enable",
  { email },
  ({ email }) => Effect.flatMap(Accounts, (accounts) => accounts.enableUser(email)).pipe(Effect.flatMap(printId))
).pipe(
  Command.withDescription("Let a disabled user sign in again; prints {\"id\"}.")
)

/** `user grant-operator` / `user revoke-operator`: the dashboard role, which only this CLI sets (D9). */
const userOperator = (name: "grant-operator" | "revoke-operator", isOperator: boolean) =>
  Command.make(
    name,
    { email },
    ({ email }) =>
      Effect.flatMap(Accounts, (accounts) => accounts.setOperator(email, isOperator)).pipe(Effect.flatMap(printId))
  ).pipe(
    Command.withDescription(
      isOperator
        ? "Let the user open the queue dashboard (every account's jobs); prints {\"id\"}."
        : "Withdraw the user's access to the queue dashboard; prints {\"id\"}."
    )
  )

const repoCreate = Command.make(
  "create",
  {
    account: accountId,
    name: Options.text("name").pipe(Options.withDescription("the repository's name, unique within the account"))
  },
  ({ account, name }) =>
    Effect.flatMap(Accounts, (accounts) => accounts.createRepository(account, name)).pipe(Effect.flatMap(printId))
).pipe(
  Command.withDescription("Create a repository of an account, for its policy overrides; prints {\"id\"}.")
)

const repoList = Command.make(
  "list",
  { account: accountId },
  ({ account }) =>
    Effect.flatMap(Accounts, (accounts) => accounts.listRepositories(account)).pipe(
      Effect.flatMap((repositories) =>
        print({
          repositories: repositories.map((repository) => ({
            ...repository,
            created_at: repository.created_at.toISOString()
          }))
        })
      )
    )
).pipe(
  Command.withDescription(
    "List an account's repositories; prints {\"repositories\": [{\"id\", \"name\", \"created_at\"}]}."
  )
)

const ledgerVerify = Command.make("verify", {
  account: accountId.pipe(Options.optional)
}, ({ account }) =>
  Effect.gen(function*() {
    const verdict = yield* Effect.flatMap(Books, (books) => books.verify(account))
    // The drift check's count, as `account_api_books_drift` shows it (D19): every wallet's, stored
    // for the gauges at once (only this command reaches Redis), or the one account's.
    const drift = Option.isNone(account)
      ? yield* Effect.flatMap(BooksDrift, (drift) => drift.check()).pipe(Effect.provide(BooksDrift.Default))
      : yield* Effect.flatMap(Books, (books) => books.drift(account))
    yield* print({ ...verdict, drift: drift.count })
    if (verdict.mismatches.length > 0 || drift.count > 0) {
      return yield* new BooksError({
        message: `the books disagree with the ledger in ${verdict.mismatches.length} places (drift ${drift.count})`
      })
    }
  })).pipe(Command.withDescription(
    "Replay every wallet's ledger (or one account's) and check each entry's balances, the sequence, the wallet row, " +
      "the sessions' sums, the running spend totals and the credit grants (D21), then run the drift check (D19; " +
      "without --account its count " +
      "becomes account_api_books_drift's at once); prints {\"wallets\", \"entries\", \"mismatches\": [...], \"drift\"} " +
      "and exits 1 when there is any mismatch or drift (D13)."
  ))

/** The operator CLI (D10): every command prints one JSON object, or its error on stderr and exits non-zero. */
export const cli = Command.make("account-api").pipe(
  Command.withDescription("Operate the Account API: migrations, organisations, users, repositories and the books."),
  Command.withSubcommands([
    migrateCommand,
    Command.make("org").pipe(Command.withDescription("Organisations."), Command.withSubcommands([orgCreate, orgList])),
    Command.make("user").pipe(
      Command.withDescription("Users."),
      Command.withSubcommands([
        userCreate,
        userList,
        userResetPassword,
        userDisable,
        userEnable,
        userOperator("grant-operator", true),
        userOperator("revoke-operator", false)
      ])
    ),
    Command.make("repo").pipe(
      Command.withDescription("Repositories."),
      Command.withSubcommands([repoCreate, repoList])
    ),
    Command.make("ledger").pipe(Command.withDescription("The books."), Command.withSubcommands([ledgerVerify]))
  ]),
  Command.run({ name: "account-api", version: "0.1.0" })
)
