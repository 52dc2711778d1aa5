import { createRequire } from 'node:module';
import { startPhase } from './status-line.js';

/**
 * A thin wrapper over autocannon (the load generator of the HTTP
 * benchmark). Typed here, since autocannon ships no types.
 */
export interface LoadRequest {
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Builds the request from the connection's context; return null to restart the sequence. */
  setupRequest?: (request: LoadRequest, context: Record<string, unknown>) => LoadRequest | null;
  onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
}

export interface LoadOptions {
  url: string;
  connections: number;
  duration_s: number;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  /** A sequence each connection runs in a loop (context reset at each loop). */
  requests?: LoadRequest[];
}

interface AutocannonResult {
  duration: number;
  errors: number;
  timeouts: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
  latency: { p50: number; p90: number; p99: number; average: number; max: number };
  requests: { total: number; average: number; sent: number };
}

type Autocannon = (options: object, callback: (error: Error | null, result: AutocannonResult) => void) => unknown;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

export interface LoadResult {
  requests_total: number;
  duration_s: number;
  requests_per_s: number;
  latency_p50_ms: number;
  latency_p99_ms: number;
  latency_average_ms: number;
  /** Count per HTTP status, e.g. { '200': 1000, '409': 12 }. */
  status: Record<string, number>;
  errors: number;
  timeouts: number;
}

export function runLoad(options: LoadOptions): Promise<LoadResult> {
  const endPhase = startPhase('load', options.duration_s);
  return new Promise<LoadResult>((resolve, reject) => {
    const settings: Record<string, unknown> = { url: options.url, connections: options.connections, duration: options.duration_s };
    // autocannon copies keys as given: an undefined method would replace its default.
    for (const name of ['method', 'path', 'headers', 'body', 'requests'] as const) {
      if (options[name] !== undefined) settings[name] = options[name];
    }
    autocannon(
      settings,
      (error, result) => {
        if (error) {
          reject(error);
          return;
        }
        const status: Record<string, number> = {};
        for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) status[code] = stats.count;
        resolve({
          requests_total: result.requests.total,
          duration_s: result.duration,
          requests_per_s: Math.round(result.requests.total / result.duration),
          latency_p50_ms: result.latency.p50,
          latency_p99_ms: result.latency.p99,
          latency_average_ms: result.latency.average,
          status,
          errors: result.errors,
          timeouts: result.timeouts,
        });
      },
    );
  }).finally(endPhase);
}

/** "p50 4 ms, p99 11 ms" */
export function latencyNote(result: LoadResult): string {
  return `p50 ${result.latency_p50_ms} ms, p99 ${result.latency_p99_ms} ms`;
}

/** "200: 5000, 204: 5000, errors 0" */
export function statusNote(result: LoadResult): string {
  const codes = Object.entries(result.status).map(([code, count]) => `${code}: ${count}`).join(', ');
  const failures = result.errors + result.timeouts > 0 ? `, socket errors ${result.errors}, timeouts ${result.timeouts}` : '';
  return `${codes || 'no responses'}${failures}`;
}
