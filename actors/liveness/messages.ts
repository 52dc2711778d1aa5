/**
 * The liveness area's public surface: what other layers and areas import.
 * Definitions live beside it; this file names the ones others may use.
 */
export { LIVENESS_INDEX_KIND, LIVENESS_KIND, livenessActorKey, livenessIndexKey } from './actor.js';
export type { IndexListView, IndexQuery } from './index-state.js';
export { livenessPolicy } from './policy.js';
export { aggregations, seriesNames } from './series.js';
export type { Aggregation, SeriesName } from './series.js';
export type { AggregationView, BriefView, HeartbeatAck, HistoryView, LatencyView, LivenessMessage, StatusView, UptimeView } from './state.js';
export { parseWindow } from './uptime.js';
