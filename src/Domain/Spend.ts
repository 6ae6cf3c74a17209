import { DateTime, Either, ParseResult, Schema } from "effect"
import { LABEL_KEY, labelKeyProblem, MAX_LABEL_VALUE } from "./Labels.js"
import * as Money from "./Money.js"
import { LimitPeriod, LimitScope, MAX_WINDOW_MINUTES, MIN_WINDOW_MINUTES } from "./SpendLimit.js"
import { RequestBody } from "./Strict.js"
import { Instant, parseDate, parseInstant, ZonedTime } from "./Time.js"
import { ExpectedVersion } from "./Version.js"

// Spend limits (D16, D19) and the spend report (D16) as clients read and write them.

/** The most limits an account keeps (D16). */
export const MAX_SPEND_LIMITS = 100

/** A concurrency limit's bounds (D19). */
export const MAX_OPEN_SESSIONS = 100_000
/** The most warnings a spend limit carries, and the percentages they may name (D19). */
export const MAX_WARNINGS = 5
export const WARN_PERCENT_MAX = 99
/** How far ahead a raise may end (D19). */
export const MAX_RAISE_DAYS = 90

/**
 * What a temporary raise (D19) may be, wherever one is set (a PUT, an approved raise request,
 * D22): why its amount does not fit a limit of `amount`, or its end at `now`; undefined when it does.
 */
export const raiseAmountProblem = (raise: Money.Decimal, amount: Money.Decimal): string | undefined =>
  raise.gt(amount) ? undefined : `must be above the limit's amount_usd (${Money.format(amount)})`

export const raiseUntilProblem = (until: DateTime.Utc, now: DateTime.Utc): string | undefined =>
  !DateTime.greaterThan(until, now)
    ? "must be in the future"
    : DateTime.greaterThan(until, DateTime.add(now, { days: MAX_RAISE_DAYS }))
    ? `must be at most ${MAX_RAISE_DAYS} days ahead`
    : undefined

const WARNINGS_MESSAGE =
  `must be at most ${MAX_WARNINGS} integers from 1 to ${WARN_PERCENT_MAX}, each above the one before`

/** A spend limit's warnings (D19): ascending percentages of its effective amount; [] for none. */
export const WarnAtPercent = Schema.Array(Schema.Int.pipe(Schema.between(1, WARN_PERCENT_MAX))).pipe(
  Schema.maxItems(MAX_WARNINGS),
  Schema.filter((percents) => percents.every((percent, i) => i === 0 || percent > (percents[i - 1] ?? percent)))
).annotations({
  description: `Up to ${MAX_WARNINGS} ascending percentages (1 to ${WARN_PERCENT_MAX}) of the effective amount; ` +
    "each one's first crossing in a period writes limit.approaching.",
  // One field to the person who fills it: every problem of the list is reported at the list.
  message: () => ({ message: WARNINGS_MESSAGE, override: true })
})

/** When a raise ends: an RFC 3339 date-time (with its zone) naming a moment that exists (`src/Domain/Time.ts`). */
const RaiseUntil = Instant({
  description: `When the raise ends (exclusive): in the future, at most ${MAX_RAISE_DAYS} days ahead.`,
  message: "must be an RFC 3339 date-time such as 2026-01-31T00:00:00Z"
})

/** A temporary raise as a PUT sends it (D19). */
export const RaiseInput = Schema.Struct({
  amount_usd: Money.PositiveUsdAmount.annotations({ description: "Above the limit's amount_usd." }),
  until: RaiseUntil
}).annotations({ identifier: "LimitRaiseInput" })

/** A temporary raise as saved: the amount it enforces until `until`. */
export const LimitRaise = Schema.Struct({
  amount_usd: Money.Usd,
  until: Schema.DateTimeUtc
}).annotations({ identifier: "LimitRaise" })

/** One limit as `PUT /developer/account/limits` sends it: a spend limit (D16) or a concurrency limit (D19). */
export const SpendLimitInput = Schema.Struct({
  scope: LimitScope.annotations({
    message: () => ({
      message: "must be account, repository, user, label, session, each_user, each_repository or each_label",
      override: true
    }),
    description: "each_user, each_repository and each_label apply to every user, repository or value of a label " +
      "key separately, each against its own spend and sessions; a user, repository or label limit of the same " +
      "period replaces them for that one."
  }),
  scope_id: Schema.optionalWith(
    Schema.NullOr(Schema.String).annotations({
      message: () => ({ message: "must be a string or null", override: true }),
      description: "The repository's or user's id (a UUID), the label as key=value (key " +
        `${LABEL_KEY.source}, value 1 to ${MAX_LABEL_VALUE} characters), or for each_label the label key; ` +
        "null or absent for account, session, each_user and each_repository."
    }),
    { exact: true }
  ),
  period: LimitPeriod.annotations({
    message: () => ({ message: "must be hour, day, week, month, rolling, concurrent or session", override: true }),
    description: "hour, day, week (from the account's week_start) or month, in the account's time zone; rolling " +
      "for the last window_minutes; concurrent for a concurrency limit (sessions open at once); session for a " +
      "session limit, and only for it."
  }),
  window_minutes: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(MIN_WINDOW_MINUTES, MAX_WINDOW_MINUTES)).annotations({
      description: `A rolling limit's window in minutes (${MIN_WINDOW_MINUTES} to ${MAX_WINDOW_MINUTES}); ` +
        "required for rolling, and only for it.",
      message: () => ({
        message: `must be an integer from ${MIN_WINDOW_MINUTES} to ${MAX_WINDOW_MINUTES}`,
        override: true
      })
    }),
    { exact: true }
  ),
  amount_usd: Schema.optionalWith(
    Money.PositiveUsdAmount.annotations({ description: "Required unless period is concurrent." }),
    { exact: true }
  ),
  max_open_sessions: Schema.optionalWith(
    Schema.Int.pipe(Schema.between(1, MAX_OPEN_SESSIONS)).annotations({
      description: "Required for a concurrent limit, and only for it.",
      message: () => ({ message: `must be an integer from 1 to ${MAX_OPEN_SESSIONS}`, override: true })
    }),
    { exact: true }
  ),
  warn_at_percent: Schema.optionalWith(WarnAtPercent, { exact: true }),
  raise: Schema.optionalWith(
    RaiseInput.annotations({
      description: "A temporary raise of a spend limit: enforced instead of amount_usd until `until`."
    }),
    { exact: true }
  )
}).annotations({ identifier: "SpendLimitInput" })
export type SpendLimitInput = typeof SpendLimitInput.Type

export const ReplaceSpendLimitsRequest = RequestBody("ReplaceSpendLimitsRequest", {
  limits: Schema.Array(SpendLimitInput).pipe(Schema.maxItems(MAX_SPEND_LIMITS)).annotations({
    description: `The whole list (at most ${MAX_SPEND_LIMITS}); [] removes every limit.`
  }),
  expected_version: Schema.optionalWith(ExpectedVersion, { exact: true })
})

/** A limit as saved, without its use: what `limits.updated` lists (D19). */
const savedFields = {
  id: Schema.String,
  scope: LimitScope,
  scope_id: Schema.NullOr(Schema.String).annotations({
    description: "The repository's or user's id, or the label's key=value; null for account and session."
  }),
  period: LimitPeriod,
  window_minutes: Schema.NullOr(Schema.Int).annotations({ description: "A rolling limit's window; null otherwise." }),
  amount_usd: Schema.NullOr(Money.Usd).annotations({ description: "The base amount; null for a concurrent limit." }),
  warn_at_percent: Schema.Array(Schema.Int).annotations({ description: "Ascending; [] when none." }),
  raise: Schema.NullOr(LimitRaise),
  max_open_sessions: Schema.NullOr(Schema.Int).annotations({ description: "Null for a spend limit." })
}

export const SavedLimit = Schema.Struct(savedFields).annotations({ identifier: "SavedLimit" })
export type SavedLimit = typeof SavedLimit.Type

/** A saved limit with its use now (D16, D19); every key present whatever the kind, null where it does not apply. */
export class SpendLimitRecord extends Schema.Class<SpendLimitRecord>("SpendLimit")({
  id: savedFields.id,
  scope: savedFields.scope,
  scope_id: savedFields.scope_id,
  period: savedFields.period,
  window_minutes: savedFields.window_minutes,
  amount_usd: savedFields.amount_usd,
  effective_amount_usd: Schema.NullOr(Money.Usd).annotations({
    description: "What the limit enforces now: the raise's amount until its until, else amount_usd; null for a " +
      "concurrent limit."
  }),
  used_usd: Schema.NullOr(Money.Usd).annotations({
    description: "Spent in the current period (a rolling limit: its window) by the sessions in scope plus what " +
      "they hold now; for a session limit, the most any open session it governs holds plus has spent; null for a " +
      "concurrent limit and for an each_ limit, whose use is each member's own (the effective limits' read)."
  }),
  warn_at_percent: savedFields.warn_at_percent,
  raise: savedFields.raise,
  max_open_sessions: savedFields.max_open_sessions,
  open_sessions: Schema.NullOr(Schema.Int).annotations({
    description: "The sessions in scope open now (from their first applied reserve); null for a spend limit and " +
      "for an each_ limit."
  }),
  period_start: Schema.NullOr(ZonedTime).annotations({
    description: "Inclusive, with the account's zone's offset; null for rolling, session and concurrent."
  }),
  period_end: Schema.NullOr(ZonedTime).annotations({
    description: "Exclusive, with the account's zone's offset; null for rolling, session and concurrent."
  })
}) {}

export class SpendLimits extends Schema.Class<SpendLimits>("SpendLimits")({
  version: Schema.Int.annotations({ description: "0 while no list was ever saved." }),
  timezone: Schema.String.annotations({ description: "The account's time zone, its periods' (D22)." }),
  limits: Schema.Array(SpendLimitRecord),
  updated_at: Schema.NullOr(Schema.DateTimeUtc)
}) {}

// The spend report (D16, D19): running totals per UTC day, grouped by one to three dimensions.

/** What a report can group by (D19): attribution, model, one label's value, or time. */
export const SpendDimension = Schema.Union(
  Schema.Literal("repository", "user", "model", "day", "month"),
  Schema.TemplateLiteral("label:", Schema.String)
)
export type SpendDimension = typeof SpendDimension.Type

/** The most dimensions one report groups by (D19). */
export const MAX_SPEND_DIMENSIONS = 3

const DIMENSION_NAMES = "repository, user, model, label:<key>, day or month"

/** Whether a dimension is time (day or month), which orders a report first (D19). */
export const isTimeDimension = (dimension: SpendDimension): dimension is "day" | "month" =>
  dimension === "day" || dimension === "month"

/** One dimension as `group_by` names it, or why it is none. */
const dimensionOf = (name: string): Either.Either<SpendDimension, string> => {
  if (name.startsWith("label:")) {
    const key = name.slice("label:".length)
    const problem = labelKeyProblem(key)
    return problem === undefined
      ? Either.right(`label:${key}` as const)
      : Either.left(`${JSON.stringify(name)}: a label's key ${problem}`)
  }
  if (Schema.is(SpendDimension)(name)) return Either.right(name)
  return Either.left(
    name === ""
      ? `must be one to ${MAX_SPEND_DIMENSIONS} of ${DIMENSION_NAMES}, comma-separated`
      : `${JSON.stringify(name)} is not a dimension: use ${DIMENSION_NAMES}`
  )
}

/**
 * The dimensions a `group_by` names (D19): one to three, comma-separated, none twice, a label's
 * key as labels take it, and day and month not together (a day already lies in one month). Left:
 * why it names none, worded for `#/query/group_by`.
 */
export const spendDimensions = (groupBy: string): Either.Either<ReadonlyArray<SpendDimension>, string> =>
  Either.gen(function*() {
    const names = groupBy.split(",")
    if (names.length > MAX_SPEND_DIMENSIONS) {
      return yield* Either.left(`must name one to ${MAX_SPEND_DIMENSIONS} dimensions, not ${names.length}`)
    }
    const dimensions: Array<SpendDimension> = []
    for (const name of names) {
      const dimension = yield* dimensionOf(name)
      if (dimensions.includes(dimension)) return yield* Either.left(`names ${dimension} twice`)
      dimensions.push(dimension)
    }
    if (dimensions.includes("day") && dimensions.includes("month")) {
      return yield* Either.left("cannot group by day and month together")
    }
    return dimensions
  })

const DIMENSION_PATTERN = "(repository|user|model|day|month|label:[a-z][a-z0-9_.-]{0,39})"

/**
 * `group_by` as the query sends it and the report echoes it: the dimensions' names joined by
 * commas (`repository,model`). Validated whole, so a bad one is 422 at `#/query/group_by`.
 */
export const SpendGroupBy = Schema.String.pipe(
  Schema.filter(
    (groupBy) => Either.match(spendDimensions(groupBy), { onLeft: (problem) => problem, onRight: () => true }),
    {
      jsonSchema: { pattern: `^${DIMENSION_PATTERN}(,${DIMENSION_PATTERN}){0,${MAX_SPEND_DIMENSIONS - 1}}$` }
    }
  )
).annotations({
  identifier: "SpendGroupBy",
  description: `One to ${MAX_SPEND_DIMENSIONS} of ${DIMENSION_NAMES}, comma-separated, none twice, not day with ` +
    "month (e.g. repository,model or day,label:team)."
})
export type SpendGroupBy = typeof SpendGroupBy.Type

/** The most groups a report lists; `total` still counts every group (D16). */
export const MAX_SPEND_GROUPS = 1000

/** The longest window a report sums: a year and a day, so a leap year's whole is one report. */
export const MAX_SPEND_DAYS = 366

const BOUND_MESSAGE =
  "must be a date (2026-01-31) or an RFC 3339 date-time (2026-01-31T00:00:00Z) between the years 0001 and 9999"

/**
 * A report's bound as sent (D16, D22): a plain date names a day of the account's zone, a
 * date-time an instant; which day that instant falls on depends on the zone too.
 */
export type SpendBoundValue =
  | { readonly _tag: "Date"; readonly date: string }
  | { readonly _tag: "Instant"; readonly at: DateTime.Utc }

/** A bound as the query sends it, or undefined when it is neither a date nor a date-time, or names none. */
export const parseBound = (text: string): SpendBoundValue | undefined => {
  if (parseDate(text) !== undefined) return { _tag: "Date", date: text }
  const at = parseInstant(text)
  return at === undefined ? undefined : { _tag: "Instant", at }
}

const BoundValue = Schema.declare(
  (u: unknown): u is SpendBoundValue => typeof u === "object" && u !== null && "_tag" in u
)

/** A report's bound as a query sends it: a plain date or a date-time. */
export const SpendBound = (description: string) =>
  Schema.transformOrFail(Schema.String, BoundValue, {
    strict: true,
    decode: (text, _, ast) => {
      const bound = parseBound(text)
      return bound === undefined
        ? ParseResult.fail(new ParseResult.Type(ast, text, BOUND_MESSAGE))
        : ParseResult.succeed(bound)
    },
    encode: (bound) => ParseResult.succeed(bound._tag === "Date" ? bound.date : DateTime.formatIso(bound.at))
  }).annotations({
    description,
    message: () => ({ message: BOUND_MESSAGE, override: true }),
    // Both spellings are accepted; the document says so rather than claiming only one.
    jsonSchema: {
      description,
      anyOf: [{ type: "string", format: "date" }, { type: "string", format: "date-time" }]
    }
  })

/** Spent, charged beyond holds, and sessions: one group's figures, or the whole report's. */
const figures = {
  spent_usd: Money.Usd,
  unfunded_usd: Money.Usd,
  sessions: Schema.Int.annotations({
    description: "Sessions counted in this group's running totals: each once, on the day and under the model " +
      "of its first spend (see docs/decisions/D16-spend-controls.md and D19-fleet-controls.md)."
  })
}

export class SpendTotal extends Schema.Class<SpendTotal>("SpendTotal")(figures) {}

const KEY_VALUES = "the repository id, user id, model, label's value, YYYY-MM-DD or YYYY-MM; null for spending " +
  "with none (no repository, user, model or such label)"

export class SpendGroup extends Schema.Class<SpendGroup>("SpendGroup")({
  key: Schema.optionalWith(Schema.NullOr(Schema.String), { exact: true }).annotations({
    description: `With exactly one dimension (D16), its value: ${KEY_VALUES}. Absent with two or three.`
  }),
  keys: Schema.Array(Schema.NullOr(Schema.String)).annotations({
    description: `Each dimension's value, in the order group_by names them: ${KEY_VALUES}.`
  }),
  ...figures
}) {}

export class SpendReport extends Schema.Class<SpendReport>("SpendReport")({
  from: Schema.DateTimeUtc.annotations({ description: "Inclusive: a midnight of the account's zone (D22)." }),
  to: Schema.DateTimeUtc.annotations({ description: "Exclusive: a midnight of the account's zone (D22)." }),
  group_by: SpendGroupBy.annotations({ description: "The dimensions grouped by, as sent." }),
  groups: Schema.Array(SpendGroup),
  total: SpendTotal
}) {}

/** A day as `YYYY-MM-DD`: the report's days, in the account's zone (D22). */
interface Day {
  readonly year: number
  readonly month: number
  readonly day: number
}

const dayOfParts = (parts: { readonly year: number; readonly month: number; readonly day: number }): Day => ({
  year: parts.year,
  month: parts.month,
  day: parts.day
})

/** A day `days` or `months` later (or earlier), by the proleptic Gregorian calendar. */
const shifted = (day: Day, by: { readonly days?: number; readonly months?: number }): Day => {
  const date = new Date(0)
  date.setUTCFullYear(day.year, day.month - 1 + (by.months ?? 0), day.day + (by.days ?? 0))
  return { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() }
}

const ordinal = (day: Day) => {
  const date = new Date(0)
  date.setUTCFullYear(day.year, day.month - 1, day.day)
  return Math.round(date.getTime() / 86_400_000)
}

/** A day as PostgreSQL's dates read it, the year unsigned (10000 included). */
export const isoDay = (day: Day): string => {
  const pad = (n: number, width: number) => String(n).padStart(width, "0")
  return `${pad(day.year, 4)}-${pad(day.month, 2)}-${pad(day.day, 2)}`
}

/** The first day a bound can name, and the day after the last: years 0001 to 9999. */
const FIRST_DAY: Day = { year: 1, month: 1, day: 1 }
const AFTER_LAST_DAY: Day = { year: 10000, month: 1, day: 1 }

/** A report's window: the days it sums (`from` inclusive, `to` exclusive) and the instants of their midnights. */
export interface SpendWindow {
  readonly fromDay: string
  readonly toDay: string
  readonly from: DateTime.Utc
  readonly to: DateTime.Utc
}

/**
 * The days a report sums, in the account's zone (D16, D22), from what the query sent: `from`
 * inclusive and `to` exclusive, the current local month by default. The totals are kept per
 * local day, so a date-time `from` is moved back to its day's start and a date-time `to` forward
 * to the next day's start unless it is one: the window is the whole days that hold the bounds.
 * One bound alone is a month's window from it or up to it. Left when `to` is not after `from` or
 * the window is longer than `MAX_SPEND_DAYS`.
 */
export const spendWindow = (
  now: DateTime.Utc,
  timeZone: string,
  query: { readonly from: SpendBoundValue | undefined; readonly to: SpendBoundValue | undefined }
): Either.Either<SpendWindow, string> => {
  const zone = DateTime.zoneUnsafeMakeNamed(timeZone)
  const localDay = (at: DateTime.Utc) => dayOfParts(DateTime.toParts(DateTime.setZone(at, zone)))
  const dayOfDate = (date: string): Day => {
    const [year = 1, month = 1, day = 1] = date.split("-").map(Number)
    return { year, month, day }
  }
  const midnight = (day: Day) =>
    DateTime.toUtc(DateTime.unsafeMakeZoned(
      { year: day.year, month: day.month, day: day.day },
      { timeZone: zone, adjustForTimeZone: true }
    ))
  const fromDay = (bound: SpendBoundValue) => bound._tag === "Date" ? dayOfDate(bound.date) : localDay(bound.at)
  const toDay = (bound: SpendBoundValue) => {
    if (bound._tag === "Date") return dayOfDate(bound.date)
    const day = localDay(bound.at)
    return DateTime.Equivalence(midnight(day), bound.at) ? day : shifted(day, { days: 1 })
  }
  const from = query.from === undefined ? undefined : fromDay(query.from)
  const to = query.to === undefined ? undefined : toDay(query.to)
  const thisMonth = { ...localDay(now), day: 1 }
  const unbounded = from !== undefined && to !== undefined
    ? { from, to }
    : from !== undefined
    ? { from, to: shifted(from, { months: 1 }) }
    : to !== undefined
    ? { from: shifted(to, { months: -1 }), to }
    : { from: thisMonth, to: shifted(thisMonth, { months: 1 }) }
  // A month past a bound can leave the years PostgreSQL's dates and the bounds hold; no totals are there.
  const window = {
    from: ordinal(unbounded.from) < ordinal(FIRST_DAY) ? FIRST_DAY : unbounded.from,
    to: ordinal(unbounded.to) > ordinal(AFTER_LAST_DAY) ? AFTER_LAST_DAY : unbounded.to
  }
  const days = ordinal(window.to) - ordinal(window.from)
  if (days <= 0) return Either.left("must be after from")
  if (days > MAX_SPEND_DAYS) return Either.left(`must be at most ${MAX_SPEND_DAYS} days after from`)
  return Either.right({
    fromDay: isoDay(window.from),
    toDay: isoDay(window.to),
    from: midnight(window.from),
    to: midnight(window.to)
  })
}
