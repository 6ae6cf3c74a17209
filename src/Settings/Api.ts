import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Authentication } from "../Auth/Middleware.js"
import { Forbidden, VersionConflict } from "../Domain/Errors.js"
import { problem } from "../Domain/Problem.js"
import { AccountSettings, ReplaceSettingsRequest } from "../Domain/Settings.js"

/** The account's settings (D22): the time zone and week start its periods follow. */
export class SettingsApi extends HttpApiGroup.make("settings")
  .add(
    HttpApiEndpoint.get("getSettings", "/developer/account/settings")
      .annotate(OpenApi.Summary, "Account settings")
      .addSuccess(AccountSettings)
      .annotate(
        OpenApi.Description,
        "The account's time zone and week start (every member may read them). Day, week, month and hour limits, their warnings " +
          "and the spend report's days and months follow the zone. UTC and monday, version 0, until saved."
      )
  )
  .add(
    HttpApiEndpoint.put("replaceSettings", "/developer/account/settings")
      .annotate(OpenApi.Summary, "Replace the settings")
      .setPayload(ReplaceSettingsRequest)
      .addSuccess(AccountSettings)
      .addError(problem(Forbidden))
      .addError(problem(VersionConflict))
      .annotate(
        OpenApi.Description,
        "Administrators only (403 before the body is read). expected_version is the version last read (omitted " +
          "means 0); a stale one is 409 version_conflict. An unknown zone is 422 at #/timezone. A change applies " +
          "from each period's next boundary: the period in force keeps its start and end, the next one starts " +
          "there and ends at the new zone's next boundary, so no spend is counted twice or lost. Each save writes " +
          "one settings.updated event."
      )
  )
  .middleware(Authentication)
{}
