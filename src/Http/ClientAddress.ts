import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Option } from "effect"
import { BlockList, isIP } from "node:net"
import { clientAddressOf, type Listing, unmapped } from "../Domain/ClientAddress.js"

/** `TRUSTED_PROXIES` entries (addresses or CIDRs) as a list `node:net` checks; an entry it cannot read is refused. */
export const trustedProxiesOf = (entries: ReadonlyArray<string>): BlockList => {
  const list = new BlockList()
  for (const entry of entries) {
    const [address = "", prefix] = entry.split("/")
    const family = isIP(unmapped(address))
    if (family === 0) throw new Error(`TRUSTED_PROXIES: ${entry} is not an IP address or CIDR`)
    const type = family === 4 ? "ipv4" : "ipv6"
    if (prefix === undefined) list.addAddress(unmapped(address), type)
    else {
      const bits = Number(prefix)
      if (!Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128)) {
        throw new Error(`TRUSTED_PROXIES: ${entry} has no valid prefix length`)
      }
      list.addSubnet(unmapped(address), bits, type)
    }
  }
  return list
}

/** Addresses judged as `node:net` reads them, IPv4 mapped into IPv6 matching an IPv4 entry. */
const listingIn = (proxies: BlockList) => (address: string): Listing => {
  const family = isIP(address)
  if (family === 0) return "not an address"
  return proxies.check(address, family === 4 ? "ipv4" : "ipv6") ? "listed" : "unlisted"
}

/** The client address of a request (`Domain/ClientAddress.ts`), from its socket's peer and its `X-Forwarded-For`. */
export const clientAddress = (request: HttpServerRequest.HttpServerRequest, proxies: BlockList): string =>
  clientAddressOf(
    Option.getOrElse(request.remoteAddress, () => "unknown"),
    request.headers["x-forwarded-for"],
    listingIn(proxies)
  )
