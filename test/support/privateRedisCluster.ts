import { Effect, Option } from "effect"
import { Redis as IORedis } from "ioredis"
import { execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { freePort, waitFor } from "./processes.js"

/** Whether a server on `port` answers and reports the cluster whole. */
const clusterOk = (port: number) =>
  Effect.promise(async () => {
    const client = new IORedis(port, "127.0.0.1", {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null
    })
    client.on("error", () => {})
    try {
      await client.connect()
      const info = await client.cluster("INFO")
      return info.includes("cluster_state:ok") ? Option.some(true) : Option.none()
    } catch {
      return Option.none()
    } finally {
      client.disconnect()
    }
  })

const answers = (port: number) =>
  Effect.promise(async () => {
    const client = new IORedis(port, "127.0.0.1", {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null
    })
    client.on("error", () => {})
    try {
      await client.connect()
      return (await client.ping()) === "PONG" ? Option.some(true) : Option.none()
    } catch {
      return Option.none()
    } finally {
      client.disconnect()
    }
  })

/**
 * A Redis Cluster of the test's own: three masters (`redis-server --cluster-enabled yes`), each
 * on a free port with a free cluster-bus port, in a temporary directory, joined by
 * `redis-cli --cluster create`. The machine's shared Redis is never touched. Stopped and removed
 * when the scope closes. Answers the seed list as `REDIS_CLUSTER_NODES` takes it.
 */
export const privateRedisCluster = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(path.join(tmpdir(), "account-api-redis-cluster-"))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
  const ports: Array<number> = []
  for (let i = 0; i < 3; i++) {
    const [port, busPort] = [yield* freePort, yield* freePort]
    ports.push(port)
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn("redis-server", [
          "--port",
          String(port),
          "--cluster-port",
          String(busPort),
          "--bind",
          "127.0.0.1",
          "--cluster-enabled",
          "yes",
          "--cluster-config-file",
          path.join(dir, `nodes-${port}.conf`),
          "--cluster-node-timeout",
          "5000",
          "--dir",
          dir,
          "--save",
          "",
          "--appendonly",
          "no",
          "--maxmemory-policy",
          "noeviction"
        ], { stdio: "ignore" })
      ),
      (child) =>
        Effect.async<void>((resume) => {
          if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
          child.once("exit", () => resume(Effect.void))
          child.kill("SIGKILL")
        })
    )
    yield* waitFor(`a cluster node answers on ${port}`, answers(port), { limit: "10 seconds", every: "50 millis" })
  }
  const nodes = ports.map((port) => `127.0.0.1:${port}`)
  yield* Effect.async<void>((resume) => {
    execFile(
      "redis-cli",
      ["--cluster", "create", ...nodes, "--cluster-replicas", "0", "--cluster-yes"],
      (error, stdout) => {
        resume(
          error === null
            ? Effect.void
            : Effect.dieMessage(`redis-cli --cluster create failed: ${error.message}\n${stdout}`)
        )
      }
    )
  })
  for (const port of ports) {
    yield* waitFor(`the cluster is whole on ${port}`, clusterOk(port), { limit: "20 seconds", every: "100 millis" })
  }
  return { nodes: nodes.join(","), ports } as const
})
