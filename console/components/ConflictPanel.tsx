import type { ComponentChildren } from "preact"

/**
 * A 409 (seed §7): what the form holds was changed by someone else since it was read. The page
 * has refetched; this shows the current state beside the person's own values and lets them
 * decide again: apply theirs on top of the new version, or keep what is there. Never retried
 * blindly.
 */
export const ConflictPanel = (
  { detail, current, mine, onApplyMine, onKeepCurrent }: {
    readonly detail: string
    /** The state as refetched now. */
    readonly current: ComponentChildren
    /** What the person had entered. */
    readonly mine: ComponentChildren
    readonly onApplyMine: () => void
    readonly onKeepCurrent: () => void
  }
) => (
  <section class="conflict" role="alert" aria-labelledby="conflict-title">
    <h3 id="conflict-title">Someone else changed this first</h3>
    <p>{detail}</p>
    <div class="conflict-sides">
      <div>
        <h4>Now</h4>
        {current}
      </div>
      <div>
        <h4>Yours</h4>
        {mine}
      </div>
    </div>
    <div class="actions">
      <button type="button" onClick={onApplyMine}>Apply mine to the current version</button>
      <button type="button" class="secondary" onClick={onKeepCurrent}>Keep the current one</button>
    </div>
  </section>
)
