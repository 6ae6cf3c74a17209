import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { Api } from "../Api.js"
import { Auth } from "../Auth.js"
import { AuthenticationLive } from "../Auth/Http.js"
import { CurrentUser } from "../Domain/Account.js"
import { Forbidden } from "../Domain/Errors.js"
import { ReplaceSpendLimitsRequest } from "../Domain/Spend.js"
import { decodeRequest } from "../Domain/Strict.js"
import { SpendLimitsService } from "../SpendControls.js"
import { SpendReports } from "./Report.js"

const decodeLimits = decodeRequest(ReplaceSpendLimitsRequest)

/** The spend controls' handlers (D16, D19): limits and the spend report. */
export const SpendHttpLive = HttpApiBuilder.group(Api, "spend", (handlers) =>
  Effect.gen(function*() {
    const limits = yield* SpendLimitsService
    const reports = yield* SpendReports
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
  })).pipe(
    Layer.provide(AuthenticationLive),
    Layer.provide([Auth.Default, SpendLimitsService.Default, SpendReports.Default])
  )
