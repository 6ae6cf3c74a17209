import { describe, expect, it } from "@effect/vitest"
import { isIP } from "node:net"
import { addressBytes, addressVerdict } from "../src/Domain/NetworkAddress.js"
import { NON_PUBLIC, PUBLIC } from "./support/addresses.js"

describe("the address rule (D17)", () => {
  it("refuses every range by the address's bytes, and names the range", () => {
    for (const [address, range] of NON_PUBLIC) {
      expect(addressVerdict(address), address).toMatchObject({ public: false, range })
    }
    for (const address of PUBLIC) expect(addressVerdict(address), address).toEqual({ public: true })
  })

  it("an IPv4 address mapped, translated or through NAT64 and 6to4 is judged as the IPv4 address is", () => {
    for (let n = 0; n < 2_000; n++) {
      const v4 = Array.from({ length: 4 }, () => Math.floor(Math.random() * 256))
      const [a = 0, b = 0, c = 0, d = 0] = v4
      const hex = [a << 8 | b, c << 8 | d].map((group) => group.toString(16))
      const expected = addressVerdict(v4.join("."))?.public
      for (
        const spelling of [
          `::ffff:${v4.join(".")}`,
          `::ffff:${hex.join(":")}`,
          `::ffff:0:${hex.join(":")}`,
          `64:ff9b::${hex.join(":")}`,
          `2002:${hex.join(":")}::1`
        ]
      ) {
        expect(addressVerdict(spelling)?.public, spelling).toBe(expected)
      }
    }
  })

  it("reads IPv6 as `new URL` writes it, and takes as an address only what Node takes as one", () => {
    for (let n = 0; n < 2_000; n++) {
      // Runs of zero groups, so `::` compression is exercised.
      const groups = Array.from({ length: 8 }, () => Math.random() < 0.4 ? 0 : Math.floor(Math.random() * 0x10000))
      const host = new URL(`https://[${groups.map((group) => group.toString(16)).join(":")}]/`).hostname
      const bytes = addressBytes(host)
      expect(bytes && Array.from({ length: 8 }, (_, i) => (bytes[2 * i] ?? 0) << 8 | (bytes[2 * i + 1] ?? 0)), host)
        .toEqual(groups)
    }
    for (
      const text of [
        "example.com",
        "1.2.3",
        "01.2.3.4",
        "1.2.3.256",
        "1::2::3",
        "1:2:3:4:5:6:7:8:9",
        "1:2:3:4:5:6:7::8",
        "1.2.3.4::",
        "::12345",
        ":1:2:3:4:5:6:7",
        "1:2:3:4:5:6:7:"
      ]
    ) {
      expect(addressBytes(text) === undefined, text).toBe(isIP(text) === 0)
    }
  })
})
