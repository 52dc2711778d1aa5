/**
 * The soft close (docs/api/auctions.md, "Soft close"), pure: a bid that
 * arrives within `window_ms` of the end moves the end to `window_ms` after
 * the bid, as auction houses do to stop sniping, but never past
 * `original_end_ms + extension_max_ms`. A window of 0 turns it off.
 */
export function softCloseEnd(end_ms: number, bid_ms: number, window_ms: number, original_end_ms: number, extension_max_ms: number): number {
  if (window_ms <= 0 || bid_ms >= end_ms || bid_ms < end_ms - window_ms) return end_ms;
  return Math.max(end_ms, Math.min(bid_ms + window_ms, original_end_ms + extension_max_ms));
}
