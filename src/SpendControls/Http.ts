import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { ApproveRaiseRequest, DeclineRaiseRequest } from "../Domain/RaiseRequests.js"
import { ReplaceSpendLimitsRequest } from "../Domain/Spend.js"
import { decodeRequest } from "../Domain/Strict.js"
import { SpendLimitsService } from "../SpendControls.js"
import { RaiseRequests } from "./RaiseRequests.js"
import { SpendReports } from "./Report.js"

const decodeLimits = decodeRequest(ReplaceSpendLimitsRequest)
const decodeApproval = decodeRequest(ApproveRaiseRequest)
const decodeDecline = decodeRequest(DeclineRaiseRequest)

/** A body that may be left out (D22's approve and decline): none, or only white space, is `{}`. */
const optionalBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.map(Effect.orDie(request.text), (text): unknown => text.trim() === "" ? {} : JSON.parse(text))

/** The caller, refused unless an administrator: checked before the body is read (D16, as D6's credits). */
const administrator = (action: string) =>
  Effect.flatMap(CurrentUser, (current) =>
    current.user.is_admin
      ? Effect.succeed(current)
      : Effect.fail(new Forbidden({ detail: `Only an administrator can ${action}.` })))

/** The spend controls' handlers (D16, D19, D22): limits, raise requests and the spend report. */
export const SpendHttpLive = HttpApiBuilder.group(Api, "spend", (handlers) =>
  Effect.gen(function*() {
    const limits = yield* SpendLimitsService
    const reports = yield* SpendReports
    const raises = yield* RaiseRequests
    return handlers
      .handle("getLimits", () => Effect.flatMap(CurrentUser, ({ account }) => limits.get(account)))
      // Raw: the body is read only once the caller is known to be an administrator (D16, as D6's credits).
      .handleRaw("replaceLimits", ({ request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* CurrentUser
          if (!user.is_admin) return yield* new Forbidden({ detail: "Only an administrator can change spend limits." })
          const body = yield* decodeLimits(yield* Effect.orDie(request.json))
          return yield* limits.replace(account, user.id, body.limits, body.expected_version ?? 0)
        }))
      .handle("getSpend", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account }) =>
          reports.report(account, { group_by: urlParams.group_by, from: urlParams.from, to: urlParams.to })))
      .handle("createRaiseRequest", ({ payload }) =>
        Effect.flatMap(CurrentUser, ({ account, user }) =>
          raises.create(account, user, payload)))
      .handle("listRaiseRequests", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, ({ account, user }) =>
          raises.list(account, user, urlParams.state ?? "pending")))
      .handleRaw("approveRaiseRequest", ({ path, request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* administrator("approve a raise request")
          const body = yield* decodeApproval(yield* optionalBody(request))
          return yield* raises.approve(account, user, path.id, body)
        }))
      .handleRaw("declineRaiseRequest", ({ path, request }) =>
        Effect.gen(function*() {
          const { account, user } = yield* administrator("decline a raise request")
          const body = yield* decodeDecline(yield* optionalBody(request))
          return yield* raises.decline(account, user, path.id, body)
        }))
  })).pipe(
    Layer.provide(AuthenticationLive),
    Layer.provide([Auth.Default, SpendLimitsService.Default, SpendReports.Default, RaiseRequests.Default])
  )
