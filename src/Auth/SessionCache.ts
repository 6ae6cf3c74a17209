import { Clock, DateTime, Effect, Option } from "effect"
import type { CurrentUser } from "../Domain/Account.js"
import { listen } from "../Sql/Listener.js"

type Caller = CurrentUser["Type"]

/** The channel migration 0011's triggers announce on: `session:<id>`, `user:<id>` or `all`. */
const CHANNEL = "sign_in_changes"
/** About 5 MB at most; past it the oldest entry makes room. */
const CAPACITY = 10_000

interface Entry {
  readonly caller: Caller
  readonly expiresAtMillis: number
}

/**
 * Live sign-in sessions this process has checked, so a request whose session is
 * known costs no statement (D2). Kept only while the process hears every change
 * that could end one (migration 0011's channel): on the first loss the cache is
 * emptied and each request goes to the database until the listener is back.
 *
 * A lookup started before a change may finish after it, with what it read
 * before: every change moves `generation`, and an answer is kept only if no
 * change came while it was being read.
 */
export class SessionCache extends Effect.Service<SessionCache>()("Auth/SessionCache", {
  scoped: Effect.gen(function*() {
    const entries = new Map<string, Entry>()
    let listening = false
    let generation = 0

    const forgetAll = () => {
      generation++
      entries.clear()
    }
    /** The process ended this session itself: refused here at once, before any notification. */
    const forget = (sessionId: string) => {
      generation++
      entries.delete(sessionId)
    }
    const forgetUser = (userId: string) => {
      generation++
      for (const [sessionId, entry] of entries) {
        if (entry.caller.user.id === userId) entries.delete(sessionId)
      }
    }

    yield* listen(CHANNEL, {
      onListening: () => {
        forgetAll()
        listening = true
      },
      onLost: () => {
        listening = false
        forgetAll()
      },
      onMessage: (payload) => {
        const [kind, id] = payload.split(":", 2)
        if (kind === "session" && id !== undefined) forget(id)
        else if (kind === "user" && id !== undefined) forgetUser(id)
        else forgetAll()
      }
    })

    const keep = (sessionId: string, caller: Caller) => {
      if (entries.size >= CAPACITY) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
      entries.set(sessionId, { caller, expiresAtMillis: DateTime.toEpochMillis(caller.session.expires_at) })
    }

    /** The caller of a session: from memory when this process knows it live, else `load`'s answer. */
    const through = <E, R>(
      sessionId: string,
      userId: string,
      load: Effect.Effect<Option.Option<Caller>, E, R>
    ): Effect.Effect<Option.Option<Caller>, E, R> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = entries.get(sessionId)
        if (entry !== undefined && entry.caller.user.id === userId && entry.expiresAtMillis > now) {
          return Effect.succeed(Option.some(entry.caller))
        }
        const readAt = generation
        return Effect.tap(load, (found) => {
          if (Option.isSome(found) && listening && generation === readAt) keep(sessionId, found.value)
        })
      })

    return { through, forget } as const
  })
}) {}
