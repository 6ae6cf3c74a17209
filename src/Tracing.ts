import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "./Config.js"
import { TracingOff } from "./Logging.js"

/**
 * Traces over OTLP/HTTP (JSON) to `OTEL_EXPORTER_OTLP_ENDPOINT` when it is set: the spans of
 * what runs under this layer (requests, their SQL statements, settlement batches), sent in
 * batches every second, the last ones on shutdown. Unset, tracing is off, as before (D18):
 * no span is built, nothing is sent.
 */
export const TracingLive = (serviceName: string) =>
  Layer.unwrapEffect(Effect.map(AppConfig, (config) =>
    Option.match(config.otlpEndpoint, {
      onNone: () => TracingOff,
      onSome: (endpoint) =>
        OtlpTracer.layer({
          url: `${endpoint}/v1/traces`,
          resource: { serviceName },
          exportInterval: "1 second"
        }).pipe(Layer.provide([FetchHttpClient.layer, OtlpSerialization.layerJson]))
    })))

/** Whether traces are exported: the API then keeps its request spans. */
export const tracingOn = Effect.map(AppConfig, (config) => Option.isSome(config.otlpEndpoint))
