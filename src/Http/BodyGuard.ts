import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Option } from "effect"
import type { IncomingMessage } from "node:http"
import { PayloadTooLarge, pointerOf, UnsupportedMediaType, ValidationFailed } from "../Domain/Errors.js"
import { textProblem } from "../Domain/Text.js"

/** D1: request bodies over 64 KiB are refused. */
export const MAX_BODY_BYTES = 64 * 1024
/** Hostile shapes are refused before any schema sees them (D1): decoding and its error messages recurse. */
export const MAX_BODY_DEPTH = 32
export const MAX_BODY_VALUES = 10_000
/** What is read and thrown away of a body over the limit, so the client can read the 413 instead of a reset. */
const DRAIN_LIMIT_BYTES = 1024 * 1024

/** Paths whose bodies are forms, not JSON: the queue dashboard's sign-in. */
const FORM_PATHS = /^\/admin\/queues(\/|$)/

const tooLarge = () => new PayloadTooLarge({ detail: `The body is larger than ${MAX_BODY_BYTES} bytes.` })

const isJson = (contentType: string) => /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i.test(contentType.trim())

type Body =
  | { readonly _tag: "Read"; readonly bytes: Buffer }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Unreadable" }

/**
 * Reads a body up to the limit. Past it, what follows is read and dropped (up
 * to a bound) rather than the socket destroyed, so a client that sent a
 * chunked body too large gets its 413, not a reset connection.
 */
const readBody = (source: IncomingMessage) =>
  Effect.async<Body>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= MAX_BODY_BYTES) chunks.push(chunk)
      else if (size > MAX_BODY_BYTES + DRAIN_LIMIT_BYTES) finish(Effect.succeed({ _tag: "TooLarge" }))
    }
    const onEnd = () =>
      finish(
        Effect.succeed(size > MAX_BODY_BYTES ? { _tag: "TooLarge" } : { _tag: "Read", bytes: Buffer.concat(chunks) })
      )
    const onError = () => finish(Effect.succeed({ _tag: "Unreadable" }))
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
    }
    const finish = (result: Effect.Effect<Body>) => {
      cleanup()
      resume(result)
    }
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    return Effect.sync(cleanup)
  })

/**
 * Walks a parsed body without recursion: refuses it when deeper or wider than
 * the bounds, and points at the first string (or key) that is not storable text.
 */
const checkJson = (body: unknown): ValidationFailed | undefined => {
  const stack: Array<{ readonly value: unknown; readonly path: ReadonlyArray<string>; readonly depth: number }> = [
    { value: body, path: [], depth: 0 }
  ]
  let values = 0
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const { depth, path, value } = next
    if (++values > MAX_BODY_VALUES) {
      return ValidationFailed.at("#", `The body holds more than ${MAX_BODY_VALUES} values.`)
    }
    if (typeof value === "string") {
      const problem = textProblem(value)
      if (problem !== undefined) return ValidationFailed.at(pointerOf(path), problem)
      continue
    }
    if (typeof value !== "object" || value === null) continue
    if (depth >= MAX_BODY_DEPTH) {
      return ValidationFailed.at("#", `The body is nested deeper than ${MAX_BODY_DEPTH} levels.`)
    }
    const entries = Array.isArray(value)
      ? value.map((item, index) => [String(index), item] as const)
      : Object.entries(value)
    for (const [key, item] of entries) {
      const keyProblem = textProblem(key)
      if (keyProblem !== undefined) return ValidationFailed.at(pointerOf(path), `a field name ${keyProblem}`)
      stack.push({ value: item, path: [...path, key], depth: depth + 1 })
    }
  }
  return undefined
}

const checkForm = (text: string): ValidationFailed | undefined => {
  for (const [name, value] of new URLSearchParams(text)) {
    const problem = textProblem(name) ?? textProblem(value)
    if (problem !== undefined) return ValidationFailed.at(pointerOf([name]), problem)
  }
  return undefined
}

const decoder = new TextDecoder("utf-8", { fatal: true })

/**
 * A request whose body was refused: reading it fails with the refusal. The
 * refusal surfaces when a handler reads the body, so the checks that come
 * first (authentication; credits' admin check, D6) still come first.
 */
const refusing = (request: HttpServerRequest.HttpServerRequest, refusal: ValidationFailed | UnsupportedMediaType) => {
  const failed = Effect.fail(refusal)
  const bodyReads = new Set<PropertyKey>(["text", "json", "arrayBuffer", "urlParamsBody", "multipart", "stream"])
  return new Proxy(request, {
    get: (target, property) => bodyReads.has(property) ? failed : Reflect.get(target, property, target)
  })
}

/**
 * Every request body passes here before any handler or schema (D1, D15): at
 * most 64 KiB however it is sent (chunked too; refused at once; a GET's too), JSON on the
 * API's endpoints (else 415), valid UTF-8, at most 32 levels deep and 10,000
 * values, and no NUL or lone surrogate in any string (else 422, when the body
 * is read). Answers the request to serve on: the same one when it has no body,
 * else one whose body is the text read here.
 */
export const guardBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const headers = request.headers
    if (Number(headers["content-length"] ?? 0) > MAX_BODY_BYTES) return yield* tooLarge()
    const hasBody = headers["transfer-encoding"] !== undefined || Number(headers["content-length"] ?? 0) > 0
    if (!hasBody) return request
    if (request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS") {
      // Nothing reads such a body, but the server takes it off the connection: within the limit too.
      const ignored = yield* readBody(NodeHttpServerRequest.toIncomingMessage(request))
      return ignored._tag === "TooLarge" ? yield* tooLarge() : request
    }
    const body = yield* readBody(NodeHttpServerRequest.toIncomingMessage(request))
    if (body._tag === "TooLarge") return yield* tooLarge()
    if (body._tag === "Unreadable") return refusing(request, ValidationFailed.at("#", "The body could not be read."))
    const checked = checkBody(request, body.bytes)
    if (checked._tag === "Refused") return refusing(request, checked.refusal)
    // The framework reads the body again from this request; the socket's stream is spent.
    const replayed = HttpServerRequest.fromWeb(
      new Request(`http://localhost${request.url}`, {
        method: request.method,
        headers: { ...headers },
        body: checked.text
      })
    )
    return replayed.modify({ remoteAddress: Option.getOrElse(request.remoteAddress, () => "unknown") })
  })

type Checked =
  | { readonly _tag: "Accepted"; readonly text: string }
  | { readonly _tag: "Refused"; readonly refusal: ValidationFailed | UnsupportedMediaType }

const checkBody = (request: HttpServerRequest.HttpServerRequest, bytes: Buffer): Checked => {
  const refused = (refusal: ValidationFailed | UnsupportedMediaType): Checked => ({ _tag: "Refused", refusal })
  const contentType = request.headers["content-type"] ?? ""
  const isForm = FORM_PATHS.test(request.url)
  if (!isForm && !isJson(contentType)) {
    return refused(
      new UnsupportedMediaType({
        detail: `A request body must be JSON (Content-Type: application/json), not ${
          contentType === "" ? "untyped" : contentType
        }.`
      })
    )
  }
  let text: string
  try {
    text = decoder.decode(bytes)
  } catch {
    return refused(ValidationFailed.at("#", "The body is not valid UTF-8."))
  }
  if (isForm) {
    const problem = checkForm(text)
    return problem === undefined ? { _tag: "Accepted", text } : refused(problem)
  }
  if (text.trim() === "") return { _tag: "Accepted", text }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return refused(ValidationFailed.at("#", "The body is not valid JSON."))
  }
  const problem = checkJson(parsed)
  return problem === undefined ? { _tag: "Accepted", text } : refused(problem)
}
