import { Clock, DateTime, Effect, Option } from "effect"
import type { CurrentUser } from "../Domain/Account.js"
import { heardEverywhere, listen } from "../Sql/Listener.js"

type Caller = CurrentUser["Type"]

/** The channel migrations 0011's and 0018's triggers announce on: `session:<id>`, `user:<id>` or `all`. */
const CHANNEL = "sign_in_changes"
/**
 * Returns once every API process has heard the sign-ins that ended before it was called (D2):
 * a request any of them takes after it returns is refused, however many sign-ins ended.
 */
export const heardByEveryProcess = heardEverywhere(CHANNEL)

/** About 5 MB at most; past it the oldest entry makes room. */
const CAPACITY = 10_000

/** A long answer (an event stream) that must end with its sign-in (D2): woken when a change may have ended it. */
interface Watcher {
  readonly userId: string
  readonly wake: () => void
}

interface Entry {
  readonly caller: Caller
  readonly expiresAtMillis: number
  /** How many heartbeats had gone out when the database was asked. */
  readonly readBefore: number
}

/**
 * Live sign-ins this process has checked, so a request whose sign-in is
 * known costs no statement (D2). Kept only while the process hears every change
 * that could end one (migration 0011's channel): on the first loss the cache is
 * emptied and each request goes to the database until the listener is back.
 *
 * Silence is noticed without waiting for the heartbeat's timeout (D2): while a
 * heartbeat is out and unanswered, nothing is answered from memory; and an
 * entry is trusted only once a heartbeat that went out after it was read has
 * come back, which proves every change since its read was heard. A revoked
 * token is so served for at most about one heartbeat interval after the
 * listener's connection goes silent, not until the heartbeat times out.
 *
 * A lookup started before a change may finish after it, with what it read
 * before: every change moves `generation`, and an answer is kept only if no
 * change came while it was being read.
 */
export class SignInCache extends Effect.Service<SignInCache>()("Auth/SignInCache", {
  scoped: Effect.gen(function*() {
    const entries = new Map<string, Entry>()
    /** What to wake when a change may have ended a sign-in: by sign-in id, each with its user. */
    const watchers = new Map<string, Set<Watcher>>()
    let listening = false
    let generation = 0
    /** Heartbeats sent on the current connection, and the number of the last one answered. */
    let sent = 0
    let answered = 0

    const wakeAll = () => {
      for (const set of watchers.values()) for (const watcher of set) watcher.wake()
    }
    const forgetAll = () => {
      generation++
      entries.clear()
      wakeAll()
    }
    /** The process ended this sign-in itself: refused here at once, before any notification. */
    const forget = (signInId: string) => {
      generation++
      entries.delete(signInId)
      for (const watcher of watchers.get(signInId) ?? []) watcher.wake()
    }
    const forgetUser = (userId: string) => {
      generation++
      for (const [signInId, entry] of entries) {
        if (entry.caller.user.id === userId) entries.delete(signInId)
      }
      for (const set of watchers.values()) {
        for (const watcher of set) if (watcher.userId === userId) watcher.wake()
      }
    }

    yield* listen(CHANNEL, {
      onListening: () => {
        forgetAll()
        // LISTEN's own answer proves the connection, as a heartbeat's would.
        sent++
        answered = sent
        listening = true
      },
      onLost: () => {
        listening = false
        forgetAll()
      },
      onHeartbeatSent: () => {
        sent++
      },
      onHeartbeatAnswered: () => {
        answered = sent
      },
      onMessage: (payload) => {
        const [kind, id] = payload.split(":", 2)
        if (kind === "session" && id !== undefined) forget(id)
        else if (kind === "user" && id !== undefined) forgetUser(id)
        else forgetAll()
      }
    })

    const keep = (signInId: string, caller: Caller, readBefore: number) => {
      if (entries.size >= CAPACITY) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
      // An entry no change has removed keeps its first read, so a busy one still becomes trusted.
      const earlier = entries.get(signInId)?.readBefore ?? readBefore
      entries.set(signInId, {
        caller,
        expiresAtMillis: DateTime.toEpochMillis(caller.signIn.expires_at),
        readBefore: Math.min(earlier, readBefore)
      })
    }

    /** The caller of a sign-in: from memory when this process knows it live, else `load`'s answer. */
    const through = <E, R>(
      signInId: string,
      userId: string,
      load: Effect.Effect<Option.Option<Caller>, E, R>
    ): Effect.Effect<Option.Option<Caller>, E, R> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = entries.get(signInId)
        if (
          entry !== undefined && listening && answered === sent && entry.readBefore < answered &&
          entry.caller.user.id === userId && entry.expiresAtMillis > now
        ) {
          return Effect.succeed(Option.some(entry.caller))
        }
        const readAt = generation
        const readBefore = sent
        return Effect.tap(load, (found) => {
          if (Option.isSome(found) && listening && generation === readAt) keep(signInId, found.value, readBefore)
        })
      })

    /**
     * Calls `wake` whenever a change may have ended the sign-in: its own end or its user's heard,
     * any change the process could not tell apart, or the listener lost or back. The caller then
     * asks `through` again. Returns the function that stops it.
     */
    const watch = (signInId: string, userId: string, wake: () => void) => {
      const watcher: Watcher = { userId, wake }
      const set = watchers.get(signInId) ?? new Set<Watcher>()
      set.add(watcher)
      watchers.set(signInId, set)
      return () => {
        set.delete(watcher)
        if (set.size === 0 && watchers.get(signInId) === set) watchers.delete(signInId)
      }
    }

    return { through, forget, watch } as const
  })
}) {}
