import { type Context, Effect, Layer } from "effect"

/**
 * A partial fake of a service, as Effect's `examples/http-server` writes them: the methods given
 * answer as given; any other member, when used, dies naming the service and the member, so a
 * test says exactly what the code under test may call.
 */
export const makeTestLayer = <I, S extends object>(tag: Context.Tag<I, S>) => (service: Partial<S>): Layer.Layer<I> =>
  Layer.succeed(tag, unimplementedProxy<S>(tag.key, service))

const unimplementedProxy = <S extends object>(service: string, implemented: Partial<S>): S =>
  new Proxy({ ...implemented }, {
    get(target, member) {
      if (member in target) return Reflect.get(target, member)
      const dead = unimplemented(service, member)
      Reflect.set(target, member, dead)
      return dead
    },
    has: () => true
  }) as S

/** Both a function and an Effect that die: the member may be called or yielded. */
const unimplemented = (service: string, member: PropertyKey) => {
  const dead = Effect.die(`${service}: "${member.toString()}" is not implemented by this fake`)
  const call = Object.assign(() => dead, dead)
  Object.setPrototypeOf(call, Object.getPrototypeOf(dead))
  return call
}
