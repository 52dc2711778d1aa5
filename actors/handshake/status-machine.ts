import type { OfferStatus, SessionStatus, SettlementStatus } from './messages.js';

/**
 * The three status sets and the moves each allows (docs/api/handshake.md,
 * "Statuses"). The session state applies moves through `move`, which refuses
 * any move not listed, so a defect cannot take a session, offer or
 * settlement somewhere the table does not go.
 */
export const SESSION_MOVES: Record<SessionStatus, readonly SessionStatus[]> = {
  NEGOTIATING: ['AGREED', 'CANCELLED', 'EXPIRED'],
  AGREED: ['SETTLED', 'CANCELLED', 'EXPIRED'],
  SETTLED: [],
  CANCELLED: [],
  EXPIRED: [],
};

export const OFFER_MOVES: Record<OfferStatus, readonly OfferStatus[]> = {
  OPEN: ['ACCEPTED', 'REJECTED', 'WITHDRAWN', 'COUNTERED', 'EXPIRED', 'CANCELLED'],
  ACCEPTED: [],
  REJECTED: [],
  WITHDRAWN: [],
  COUNTERED: [],
  EXPIRED: [],
  CANCELLED: [],
};

export const SETTLEMENT_MOVES: Record<SettlementStatus, readonly SettlementStatus[]> = {
  STAGING: ['COMMITTING', 'SETTLED', 'ROLLED_BACK'],
  COMMITTING: ['SETTLED'],
  SETTLED: [],
  ROLLED_BACK: [],
};

export function canMove<S extends string>(table: Record<S, readonly S[]>, from: S, to: S): boolean {
  return table[from].includes(to);
}

/** Applies an allowed move; a move the table does not allow is a defect (the callers check first). */
export function move<S extends string>(table: Record<S, readonly S[]>, target: { status: S }, to: S): void {
  if (!canMove(table, target.status, to)) throw new Error(`handshake: no move from ${target.status} to ${to}`);
  target.status = to;
}

export function isFinalSession(status: SessionStatus): boolean {
  return SESSION_MOVES[status].length === 0;
}
