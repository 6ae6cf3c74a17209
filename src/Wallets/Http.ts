import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, DateTime, Duration, Effect, Layer, Option, Schema, Stream } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { AppConfig } from "../Config.js"
import { type Account, CurrentUser } from "../Domain/Account.js"
import { Forbidden, type ValidationFailed } from "../Domain/Errors.js"
import { Grant } from "../Domain/Grants.js"
import { DEFAULT_PAGE_SIZE } from "../Domain/Paging.js"
import { decodeRequest } from "../Domain/Strict.js"
import { CreditAdded, IdempotencyKey, requestFingerprint, Wallet } from "../Domain/Wallet.js"
import { Wallets } from "../Wallets.js"
import { AddCreditRequest, SetBudgetRequest, VoidGrantRequest } from "./Api.js"
import { CSV_HEADER, csvLine } from "./Csv.js"
import { makeExportGate } from "./ExportGate.js"
import { type IdempotentOutcome, WalletIdempotency } from "./Idempotency.js"

const Envelope = Schema.Struct({ idempotency_key: IdempotencyKey })

/**
 * The body as JSON. Read here, not by the framework, because D6 orders the
 * checks "key syntax, idempotency lookup, body validation": a retry whose key
 * is recorded is answered from the record before the rest of its body is
 * looked at. A body that is not JSON, or too large, fails as everywhere else.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest) => Effect.orDie(request.json)

/**
 * The idempotency key, decoded on its own first. When it is missing or
 * malformed nothing can be looked up, so the whole body is validated and every
 * offending field (the key among them) is reported at once.
 */
const keyOf = <A, I>(body: unknown, schema: Schema.Schema<A, I>): Effect.Effect<string, ValidationFailed> =>
  Schema.decodeUnknown(Envelope)(body).pipe(
    Effect.map((envelope) => envelope.idempotency_key),
    Effect.catchTag("ParseError", () =>
      // The full schema checks the key too, so this fails; succeeding would be a bug in the schemas.
      Effect.zipRight(decodeRequest(schema)(body), Effect.dieMessage("a body with an invalid key passed validation")))
  )

/** A replay answers exactly as the first success did (200, its body) and says it is a replay (D6). */
const respond = <A>(outcome: IdempotentOutcome<A>): A | HttpServerResponse.HttpServerResponse =>
  outcome._tag === "Applied"
    ? outcome.value
    : HttpServerResponse.unsafeJson(outcome.result, { status: 200, headers: { "idempotent-replayed": "true" } })

/** D21's credit terms, compared by a retry's fingerprint when sent. */
const CREDIT_TERMS = ["expires_at", "priority", "category"] as const

export const WalletsHttpLive = HttpApiBuilder.group(Api, "wallets", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const idempotency = yield* WalletIdempotency
    const config = yield* AppConfig
    const exports = makeExportGate()

    const mutate = <A, I, B, BI, E>(
      request: HttpServerRequest.HttpServerRequest,
      account: Account,
      options: {
        readonly endpoint: string
        readonly schema: Schema.Schema<A, I>
        readonly amountField: string
        readonly terms?: ReadonlyArray<string>
        readonly answer: Schema.Schema<B, BI>
        readonly apply: (input: A) => Effect.Effect<B, E>
      }
    ) =>
      Effect.gen(function*() {
        const body = yield* readBody(request)
        const key = yield* keyOf(body, options.schema)
        const outcome = yield* idempotency.once(
          account,
          {
            key,
            endpoint: options.endpoint,
            fingerprint: requestFingerprint(body, options.amountField, options.terms)
          },
          options.answer,
          Effect.flatMap(decodeRequest(options.schema)(body), options.apply)
        )
        return respond(outcome)
      })

    return handlers
      .handle("getWallet", () =>
        Effect.flatMap(
          CurrentUser,
          ({ account }) =>
            Effect.map(
              wallets.getJson(account),
              (wallet) => HttpServerResponse.text(wallet, { contentType: "application/json" })
            )
        ))
      .handleRaw("setBudget", ({ request }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          mutate(request, account, {
            endpoint: "PUT /developer/account/wallet",
            schema: SetBudgetRequest,
            amountField: "budget_usd",
            answer: Wallet,
            apply: (input) => wallets.setBudget(account, input)
          })))
      .handleRaw("addCredit", ({ request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* CurrentUser
          // D6: checked right after authentication; a non-administrator learns nothing about the body.
          if (!user.is_admin) return yield* new Forbidden({ detail: "Only an administrator can add credit." })
          return yield* mutate(request, account, {
            endpoint: "POST /developer/account/wallet/credits",
            schema: AddCreditRequest,
            amountField: "amount_usd",
            terms: CREDIT_TERMS,
            answer: CreditAdded,
            apply: (input) => wallets.addCredit(account, input)
          })
        }))
      .handle("listGrants", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          wallets.listGrants(account, urlParams.state ?? "live")))
      .handleRaw("voidGrant", ({ path, request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* CurrentUser
          // D21 as D6: checked right after authentication.
          if (!user.is_admin) {
            return yield* new Forbidden({ detail: "Only an administrator can void a grant." })
          }
          return yield* mutate(request, account, {
            endpoint: `POST /developer/account/wallet/grants/${path.id.toLowerCase()}/void`,
            schema: VoidGrantRequest,
            amountField: "amount_usd",
            answer: Grant,
            apply: (input) =>
              wallets.voidGrant(account, path.id, input)
          })
        }))
      // PostgreSQL formatted the page as LedgerPage encodes it (test/WalletsLedger.test.ts holds that): sent as it is.
      .handle("listLedger", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          Effect.map(
            wallets.ledgerJson(account, {
              before: Option.fromNullable(urlParams.before),
              limit: urlParams.limit ?? DEFAULT_PAGE_SIZE
            }),
            (page) => HttpServerResponse.text(page, { contentType: "application/json" })
          )))
      .handle("exportLedger", ({ urlParams }) =>
        Effect.gen(function*() {
          const { account } = yield* CurrentUser
          const request = yield* HttpServerRequest.HttpServerRequest
          const leave = yield* exports.enter(account)
          const response = NodeHttpServerRequest.toServerResponse(request)
          // The slot is freed when the answer ends, however it ends: sent, cut off, or the client gone.
          response.once("close", leave)
          const rows = yield* wallets.exportLedger(account, {
            from: Option.map(Option.fromNullable(urlParams.from), DateTime.toDate),
            to: Option.map(Option.fromNullable(urlParams.to), DateTime.toDate)
          }).pipe(Effect.onError(() => Effect.sync(leave)))
          // A reader that takes nothing for the stall limit is cut off: progress is a page written
          // or the socket drained (the next page is written only then).
          const stall = setTimeout(() => response.destroy(), Duration.toMillis(config.exportStall))
          const progress = () => stall.refresh()
          response.on("drain", progress)
          response.once("close", () => clearTimeout(stall))
          // One write per page (a few hundred rows), not one per row. A failure once the header
          // is out cuts the connection, so the client sees a broken body, not a complete CSV.
          const lines = Stream.mapChunks(rows, (chunk) => Chunk.of(Chunk.join(Chunk.map(chunk, csvLine), ""))).pipe(
            Stream.tap(() => Effect.sync(progress)),
            Stream.tapErrorCause(() => Effect.sync(() => response.destroy()))
          )
          return HttpServerResponse.stream(Stream.encodeText(Stream.concat(Stream.make(CSV_HEADER), lines)), {
            contentType: "text/csv; charset=utf-8",
            headers: { "content-disposition": "attachment; filename=\"ledger.csv\"", "cache-control": "no-store" }
          })
        }))
      .handle("getWalletAsOf", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          wallets.asOf(account, urlParams.time)))
  })).pipe(Layer.provide(AuthenticationLive), Layer.provide([Auth.Default, Wallets.Default, WalletIdempotency.Default]))
