import type { AuctionStatus } from './messages.js';

/**
 * The auction's states (docs/api/auctions.md, "States"):
 *
 *   scheduled --start_time (alarm) or PUT open--> open
 *   open --end_time (alarm), close, PUT ended|settled, buy it now--> ended --capture answered--> settled
 *   scheduled | open --PUT cancelled or DELETE--> cancelled
 *
 * `ended` lasts while the settlement's ledger steps are on their way;
 * settled and cancelled are final. These are the moves a seller or admin may
 * ask for with PUT status; the others happen by themselves.
 */
export const REQUESTABLE: Record<AuctionStatus, readonly AuctionStatus[]> = {
  scheduled: ['open', 'cancelled'],
  open: ['ended', 'settled', 'cancelled'],
  ended: [],
  settled: [],
  cancelled: [],
};

export function canRequest(from: AuctionStatus, to: AuctionStatus): boolean {
  return REQUESTABLE[from].includes(to);
}

export function isFinal(status: AuctionStatus): boolean {
  return status === 'settled' || status === 'cancelled';
}
