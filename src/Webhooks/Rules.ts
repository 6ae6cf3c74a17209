import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { addressVerdict, type NonPublic } from "../Domain/NetworkAddress.js"
import type { DeliveryFailure } from "../Domain/Webhooks.js"

/**
 * The webhook rules that need Node (D17): secrets, signatures and which addresses a delivery may
 * reach. Apart from `Domain/Webhooks.ts`, which the contract (and so the client package, in
 * browsers too) loads.
 */

/** A new secret: `whsec_` and base64 of 32 random bytes (D17). */
export const newSecret = () => `whsec_${randomBytes(32).toString("base64")}`

/** Secrets' keys, made once: a key made from bytes at every signature costs more than the HMAC. */
const keys = new Map<string, KeyObject>()
/** Past this many secrets the cache starts again (ten endpoints an account: thousands of accounts' worth). */
const KEYS_CACHED = 10_000

/** The key a secret signs with: the bytes of the base64 after `whsec_`. */
const keyOf = (secret: string): KeyObject => {
  const cached = keys.get(secret)
  if (cached !== undefined) return cached
  if (keys.size >= KEYS_CACHED) keys.clear()
  const key = createSecretKey(Buffer.from(secret.replace(/^whsec_/, ""), "base64"))
  keys.set(secret, key)
  return key
}

/**
 * `webhook-signature`: `v1,` and base64 HMAC-SHA256 over `{id}.{timestamp}.{body}`, one per
 * secret, space-separated (two during a rotation).
 */
export const signature = (
  secrets: ReadonlyArray<string>,
  message: { readonly id: string; readonly timestamp: number; readonly body: string }
) =>
  secrets.map((secret) =>
    `v1,${
      createHmac("sha256", keyOf(secret)).update(`${message.id}.${message.timestamp}.${message.body}`).digest(
        "base64"
      )
    }`
  ).join(" ")

/** Why a delivery may not reach an address it resolved to or names literally, or undefined when it may (D17). */
export const refusedAddress = (address: string): NonPublic | undefined => {
  const verdict = addressVerdict(address)
  // Not an address at all (no lookup answers one): refused, rather than guessed at.
  if (verdict === undefined) return { address, range: "none", kind: "not an IP address" }
  return verdict.public ? undefined : verdict
}

/** Raised by a delivery's lookup, or before it for a literal: the address is not public. */
export class AddressRefused extends Error {
  constructor(readonly host: string, readonly refused: NonPublic) {
    const named = host.replace(/^\[(.*)\]$/, "$1") === refused.address
      ? `${host} is`
      : `${host} resolves to ${refused.address},`
    super(`${named} ${refused.kind} (${refused.range})`)
  }
}

/** What lets the refusals below through, named in their text for a developer who meets them. */
const INSECURE_SETTING = "allowed only where WEBHOOK_ALLOW_INSECURE=true, in development and tests"

/** Why a URL cannot be an endpoint's, or undefined when it can (its address is checked again at each delivery). */
export const urlProblem = (text: string, allowInsecure: boolean): string | undefined => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return "must be an absolute URL"
  }
  if (url.protocol !== "https:" && !(allowInsecure && url.protocol === "http:")) {
    return allowInsecure ? "must be an http or https URL" : `must be an https URL (http is ${INSECURE_SETTING})`
  }
  if (url.username !== "" || url.password !== "") return "must not hold a user name or password"
  if (allowInsecure) return undefined
  // `new URL` has written an IP literal in one spelling (IPv4 dotted, IPv6 in hex): its bytes are judged.
  const host = url.hostname.replace(/\.$/, "")
  if (host === "localhost" || host.endsWith(".localhost")) return `must not name localhost (${INSECURE_SETTING})`
  const verdict = addressVerdict(host)
  if (verdict !== undefined && !verdict.public) {
    return `must not name a non-public address: ${verdict.address} is ${verdict.kind} (${verdict.range}), ${INSECURE_SETTING}`
  }
  return undefined
}

/** A URL's host when it is an IP literal that is not public: no lookup runs for a literal, so it is judged here. */
export const refusedLiteral = (hostname: string): NonPublic | undefined => {
  const verdict = addressVerdict(hostname)
  return verdict === undefined || verdict.public ? undefined : verdict
}

/** Name-resolution failures, by Node's codes (getaddrinfo's and c-ares'). */
const DNS_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA", "ENODATA", "ESERVFAIL"])
/** TLS failures: Node's TLS and OpenSSL errors, certificate checks included. */
const TLS_CODES =
  /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|EPROTO$)/

/** The class of a request's error (D17): what the account is shown instead of the error itself. */
export const failureOf = (error: Error): DeliveryFailure => {
  if (error instanceof AddressRefused) return "address_refused"
  if (error.name === "AbortError" || error.name === "TimeoutError") return "timeout"
  const code = "code" in error && typeof error.code === "string" ? error.code : ""
  if (code === "ETIMEDOUT") return "timeout"
  if (DNS_CODES.has(code)) return "dns_failed"
  if (TLS_CODES.test(code)) return "tls_failed"
  return "connection_failed"
}
