/**
 * Which IP addresses are public (D17: a webhook reaches no other without `WEBHOOK_ALLOW_INSECURE`).
 * An address is judged by its bytes, never by its spelling: `::ffff:7f00:1`, `::ffff:127.0.0.1` and
 * `127.0.0.1` are one address. Pure, no I/O; `new URL` has already turned IPv4's decimal, octal, hex
 * and short forms into dotted ones, and DNS answers are dotted or IPv6 text.
 */

/** Why an address is not public: the range it falls in, named as IANA's special-purpose registries name it. */
export interface NonPublic {
  readonly address: string
  readonly range: string
  readonly kind: string
}

/** The verdict on an IP literal: public, or the range that makes it not. */
export type AddressVerdict = { readonly public: true } | ({ readonly public: false } & NonPublic)

/**
 * A range and what it is. `embedsIpv4At` marks an IPv6 range that carries an IPv4 address at that
 * byte offset and reaches it: the address is then judged by the IPv4 rule.
 */
interface Range {
  readonly cidr: string
  readonly kind: string
  readonly embedsIpv4At?: number
}

/** IPv4 ranges that are not public (IANA IPv4 special-purpose registry, less what is globally reachable). */
const IPV4_RANGES: ReadonlyArray<Range> = [
  { cidr: "0.0.0.0/8", kind: "this network" },
  { cidr: "10.0.0.0/8", kind: "private" },
  { cidr: "100.64.0.0/10", kind: "carrier-grade NAT" },
  { cidr: "127.0.0.0/8", kind: "loopback" },
  { cidr: "169.254.0.0/16", kind: "link-local" },
  { cidr: "172.16.0.0/12", kind: "private" },
  { cidr: "192.0.0.0/24", kind: "IETF protocol assignments" },
  { cidr: "192.0.2.0/24", kind: "documentation" },
  { cidr: "192.88.99.0/24", kind: "6to4 relay anycast" },
  { cidr: "192.168.0.0/16", kind: "private" },
  { cidr: "198.18.0.0/15", kind: "benchmarking" },
  { cidr: "198.51.100.0/24", kind: "documentation" },
  { cidr: "203.0.113.0/24", kind: "documentation" },
  { cidr: "224.0.0.0/4", kind: "multicast" },
  { cidr: "240.0.0.0/4", kind: "reserved" },
  { cidr: "255.255.255.255/32", kind: "broadcast" }
]

/**
 * IPv6 ranges that are not public, or that embed an IPv4 address. Only global unicast (`2000::/3`)
 * is public: the three ranges around it say so, and longer ones inside them say what they are.
 * IPv4-compatible, Teredo and local-use NAT64 addresses are refused whole: deprecated or local
 * forms no public receiver is reached by, whose embedded address (Teredo's obfuscated) says little.
 */
const IPV6_RANGES: ReadonlyArray<Range> = [
  { cidr: "::/3", kind: "reserved" },
  { cidr: "4000::/2", kind: "reserved" },
  { cidr: "8000::/1", kind: "reserved" },
  { cidr: "::/128", kind: "unspecified" },
  { cidr: "::1/128", kind: "loopback" },
  { cidr: "::/96", kind: "IPv4-compatible" },
  { cidr: "::ffff:0:0/96", kind: "IPv4-mapped", embedsIpv4At: 12 },
  { cidr: "::ffff:0:0:0/96", kind: "IPv4-translated", embedsIpv4At: 12 },
  { cidr: "64:ff9b::/96", kind: "NAT64", embedsIpv4At: 12 },
  { cidr: "64:ff9b:1::/48", kind: "local-use NAT64" },
  { cidr: "100::/64", kind: "discard-only" },
  { cidr: "2001::/32", kind: "Teredo" },
  { cidr: "2001:2::/48", kind: "benchmarking" },
  { cidr: "2001:10::/28", kind: "ORCHID" },
  { cidr: "2001:db8::/32", kind: "documentation" },
  { cidr: "2002::/16", kind: "6to4", embedsIpv4At: 2 },
  { cidr: "3fff::/20", kind: "documentation" },
  { cidr: "fc00::/7", kind: "unique-local" },
  { cidr: "fe80::/10", kind: "link-local" },
  { cidr: "fec0::/10", kind: "site-local" },
  { cidr: "ff00::/8", kind: "multicast" }
]

/** The four bytes of a dotted IPv4 address (`1.2.3.4`, each part 0–255 in decimal), else undefined. */
const ipv4Bytes = (text: string): Uint8Array | undefined => {
  const parts = text.split(".")
  if (parts.length !== 4 || !parts.every((part) => /^(0|[1-9]\d{0,2})$/.test(part) && Number(part) <= 255)) {
    return undefined
  }
  return Uint8Array.from(parts, Number)
}

/** The sixteen bytes of an IPv6 address in text (`::` once at most, a dotted IPv4 tail allowed), else undefined. */
const ipv6Bytes = (text: string): Uint8Array | undefined => {
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const groupsOf = (half: string, last: boolean): Array<number> | undefined => {
    if (half === "") return []
    const groups: Array<number> = []
    const pieces = half.split(":")
    for (const [index, piece] of pieces.entries()) {
      const tail = last && index === pieces.length - 1 ? ipv4Bytes(piece) : undefined
      if (tail !== undefined) {
        const [a = 0, b = 0, c = 0, d = 0] = tail
        groups.push(a << 8 | b, c << 8 | d)
      } else if (/^[0-9a-f]{1,4}$/i.test(piece)) {
        groups.push(parseInt(piece, 16))
      } else {
        return undefined
      }
    }
    return groups
  }
  const head = groupsOf(halves[0] ?? "", halves.length === 1)
  const tail = halves.length === 2 ? groupsOf(halves[1] ?? "", true) : []
  if (head === undefined || tail === undefined) return undefined
  const missing = 8 - head.length - tail.length
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined
  const groups = [...head, ...Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail]
  return Uint8Array.from(groups.flatMap((group) => [group >> 8, group & 0xff]))
}

/**
 * The bytes of an IP literal (4 or 16), or undefined for anything else (a name). Takes a URL's
 * host with or without its brackets, and drops an IPv6 zone (`%eth0`), which names no other address.
 */
export const addressBytes = (text: string): Uint8Array | undefined => {
  const bare = text.replace(/^\[(.*)\]$/, "$1")
  return bare.includes(":") ? ipv6Bytes(bare.replace(/%.*$/, "")) : ipv4Bytes(bare)
}

const rangeOf = (range: Range) => {
  const [base = "", length = ""] = range.cidr.split("/")
  const bytes = addressBytes(base)
  if (bytes === undefined) throw new Error(`not a CIDR: ${range.cidr}`)
  return { ...range, bytes, length: Number(length) }
}
const IPV4 = IPV4_RANGES.map(rangeOf)
const IPV6 = IPV6_RANGES.map(rangeOf)

const within = (bytes: Uint8Array, range: { readonly bytes: Uint8Array; readonly length: number }) => {
  for (let bit = 0; bit < range.length; bit++) {
    const mask = 0x80 >> (bit % 8)
    if (((bytes[bit >> 3] ?? 0) & mask) !== ((range.bytes[bit >> 3] ?? 0) & mask)) return false
  }
  return true
}

const format = (bytes: Uint8Array) =>
  bytes.length === 4
    ? bytes.join(".")
    : Array.from({ length: 8 }, (_, n) => ((bytes[2 * n] ?? 0) << 8 | (bytes[2 * n + 1] ?? 0)).toString(16)).join(":")

/** The verdict on an address's bytes: the longest range that holds it decides. */
const judge = (bytes: Uint8Array, shown: string): AddressVerdict => {
  const ranges = bytes.length === 4 ? IPV4 : IPV6
  const found = ranges.filter((range) => within(bytes, range)).reduce<typeof ranges[number] | undefined>(
    (best, range) => best === undefined || range.length > best.length ? range : best,
    undefined
  )
  if (found === undefined) return { public: true }
  if (found.embedsIpv4At !== undefined) {
    const embedded = bytes.slice(found.embedsIpv4At, found.embedsIpv4At + 4)
    const inner = judge(embedded, format(embedded))
    return inner.public
      ? inner
      : { public: false, address: shown, range: inner.range, kind: `${found.kind} ${inner.address}, ${inner.kind}` }
  }
  return { public: false, address: shown, range: found.cidr, kind: found.kind }
}

/** The verdict on an IP literal (dotted IPv4 or IPv6 text, bracketed or not); undefined when it is a name. */
export const addressVerdict = (text: string): AddressVerdict | undefined => {
  const bytes = addressBytes(text)
  return bytes === undefined ? undefined : judge(bytes, text.replace(/^\[(.*)\]$/, "$1"))
}
