/** GET /admin/metrics/recent (http/metrics-window.ts on the node). */
export interface RouteSample {
  route: string;
  requests_per_s: number;
  server_errors_per_s: number;
  client_errors_per_s: number;
  p50_ms: number | null;
  p99_ms: number | null;
}

export interface Sample {
  at: string;
  at_ms: number;
  window_s: number;
  requests_per_s: number;
  server_errors_per_s: number;
  client_errors_per_s: number;
  p50_ms: number | null;
  p99_ms: number | null;
  commit_p50_ms: number | null;
  commit_p99_ms: number | null;
  replication_p50_ms: number | null;
  replication_p99_ms: number | null;
  activations_per_s: number;
  actors_active: number | null;
  mailbox_messages: number | null;
  routes: RouteSample[];
}

export interface RecentMetrics {
  interval_ms: number;
  history_seconds: number;
  samples: Sample[];
}
