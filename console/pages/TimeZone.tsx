import { ConflictPanel } from "../components/ConflictPanel.js"
import { SelectField } from "../components/Field.js"
import { ProblemBanner } from "../components/ProblemBanner.js"
import { useSignedIn } from "../session.js"
import { useVersioned } from "../versioned.js"
import { type AccountSettings, useAccountSettings, zoneNames } from "../zone.js"

type WeekStart = AccountSettings["week_start"]

interface SettingsDraft {
  readonly timezone: string
  readonly week_start: WeekStart
}

const WEEK_STARTS: ReadonlyArray<{ readonly value: WeekStart; readonly label: string }> = [
  { value: "monday", label: "Monday" },
  { value: "sunday", label: "Sunday" }
]

const dayName = (day: WeekStart) => day === "sunday" ? "Sunday" : "Monday"

const SettingsWords = ({ settings }: { readonly settings: SettingsDraft }) => (
  <p>
    {settings.timezone}, weeks from {dayName(settings.week_start)}
  </p>
)

/**
 * The account's time zone and the first day of its weeks (D22): every member reads them, the
 * periods of hour, day, week and month limits count in them. An administrator changes them
 * (`PUT /developer/account/settings`, from the version read, console/versioned.ts); a 409 shows
 * the current ones beside theirs, a 422 at `#/timezone` shows at the zone's field.
 */
export const TimeZone = () => {
  const signedIn = useSignedIn()
  const shared = useAccountSettings()
  const settings = useVersioned({
    load: (api) => api.getSettings(),
    toDraft: (record): SettingsDraft => ({ timezone: record.timezone, week_start: record.week_start }),
    save: async (api, draft, expected_version) => {
      const saved = await api.replaceSettings({ ...draft, expected_version })
      shared.reload()
      return saved
    }
  })
  const { base, draft, errors } = settings
  const zones = zoneNames()
  const choices = draft === undefined || zones.includes(draft.timezone) ? zones : [draft.timezone, ...zones]

  return (
    <>
      <h1>Time zone</h1>
      <ProblemBanner
        problem={settings.loaded.problem}
        retryInSeconds={settings.loaded.retryInSeconds}
        onRetry={settings.loaded.reload}
      />
      {base !== undefined && (
        <section class="card" aria-labelledby="zone-now-title">
          <h2 id="zone-now-title">Where the account's periods are counted</h2>
          <p data-field="settings">
            Hours, days, weeks and months of the limits are counted in <strong>{base.timezone}</strong>
            , and weeks start on <strong>{dayName(base.week_start)}</strong>
            {base.version === 0 ? " (the defaults: nothing was saved yet)." : ` (version ${base.version}).`}
          </p>
          <p class="muted">
            A change applies from each period's next boundary: a period already running ends where it was going to end,
            and the next one starts in the new zone.
          </p>
        </section>
      )}
      {signedIn.isAdmin && draft !== undefined && (
        <section class="card" aria-labelledby="zone-form-title">
          <h2 id="zone-form-title">Change them</h2>
          <ProblemBanner problem={settings.problem} onRetry={() => void settings.save()} />
          {settings.conflict !== undefined && (
            <ConflictPanel
              detail={settings.conflict.detail}
              current={<SettingsWords settings={settings.conflict.current} />}
              mine={<SettingsWords settings={draft} />}
              onApplyMine={() => void settings.applyMine()}
              onKeepCurrent={settings.keepCurrent}
            />
          )}
          <form
            onSubmit={(event) => {
              event.preventDefault()
              void settings.save()
            }}
          >
            <SelectField
              id="settings-timezone"
              label="Time zone"
              hint="An IANA zone, such as Europe/Berlin or America/Los_Angeles"
              value={draft.timezone}
              options={choices.map((zone) => ({ value: zone, label: zone }))}
              onChange={(timezone) => settings.setDraft({ ...draft, timezone })}
              error={errors["timezone"]}
            />
            <SelectField
              id="settings-week-start"
              label="Weeks start on"
              value={draft.week_start}
              options={WEEK_STARTS}
              onChange={(week_start) => settings.setDraft({ ...draft, week_start })}
              error={errors["week_start"]}
            />
            <div class="actions">
              <button type="submit" disabled={settings.saving || settings.conflict !== undefined}>
                Save the time zone
              </button>
            </div>
            <p role="status">
              {settings.saved === undefined
                ? ""
                : `Saved (version ${settings.saved.version}): ${settings.saved.timezone}, weeks from ${
                  dayName(settings.saved.week_start)
                }. It applies from each period's next boundary.`}
            </p>
          </form>
        </section>
      )}
    </>
  )
}
