/**
 * GET /admin/metrics/recent: the node's own types (http/metrics-window.ts is pure, with no
 * imports), so the page and the route cannot drift apart.
 */
export type { RouteSample, Sample } from '../../../../http/metrics-window.js';
