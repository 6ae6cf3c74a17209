import * as OpenApi from "@effect/platform/OpenApi"
import { describe, expect, it } from "@effect/vitest"
import { Api } from "../src/Api.js"

describe("the OpenAPI document's description (D9)", () => {
  it("names every group of the contract, so a reader of /docs sees the whole API at a glance", () => {
    const document = OpenApi.fromApi(Api)
    const groups = Object.keys(Api.groups)
    expect(groups).toContain("webhooks")
    expect(groups.length).toBeGreaterThanOrEqual(8)
    const missing = groups.filter((group) => !(document.info.description ?? "").includes(`(\`${group}\`)`))
    expect(missing).toEqual([])
  })
})
