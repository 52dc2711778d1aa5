import type { Bundle, CurrencyDelta, OfferView, PartyDelta, Role, RoundConcessions, Side } from './messages.js';

/**
 * The concessions view of a session's history (spec §4.6 `view=concessions`):
 * for each offer, what changed on each side against the offer before it (the
 * first offer against an empty bundle). A side is what that party gives, so
 * a negative currency delta is that party conceding less, a positive one
 * conceding more.
 */
const EMPTY_SIDE: Side = { currency_legs: [], item_legs: [], terms: [] };

function totals(side: Side): Map<string, number> {
  const sums = new Map<string, number>();
  for (const leg of side.currency_legs) sums.set(leg.currency_id, (sums.get(leg.currency_id) ?? 0) + leg.amount);
  return sums;
}

function itemUnits(side: Side): Map<string, number> {
  const units = new Map<string, number>();
  for (const leg of side.item_legs) units.set(leg.item_id, (units.get(leg.item_id) ?? 0) + leg.quantity);
  return units;
}

export function sideDelta(before: Side, after: Side, party_id: string, role: Role): PartyDelta {
  const was = totals(before);
  const now = totals(after);
  const currency_deltas: CurrencyDelta[] = [];
  for (const currency_id of [...new Set([...was.keys(), ...now.keys()])].sort()) {
    const delta = (now.get(currency_id) ?? 0) - (was.get(currency_id) ?? 0);
    if (delta !== 0) currency_deltas.push({ currency_id, delta });
  }
  const itemsWas = itemUnits(before);
  const itemsNow = itemUnits(after);
  const items_added = [...itemsNow.keys()].filter((id) => (itemsNow.get(id) ?? 0) > (itemsWas.get(id) ?? 0)).sort();
  const items_removed = [...itemsWas.keys()].filter((id) => (itemsWas.get(id) ?? 0) > (itemsNow.get(id) ?? 0)).sort();
  const termsWas = new Map(before.terms.map((term) => [term.key, `${term.binding}\u0000${term.value}`]));
  const termsNow = new Map(after.terms.map((term) => [term.key, `${term.binding}\u0000${term.value}`]));
  const terms_changed = [...new Set([...termsWas.keys(), ...termsNow.keys()])].filter((key) => termsWas.get(key) !== termsNow.get(key)).sort();
  return { party_id, role, currency_deltas, items_added, items_removed, terms_changed };
}

export function concessions(offers: OfferView[], initiator_id: string, responder_id: string): RoundConcessions[] {
  let previous: Bundle = { initiator_gives: EMPTY_SIDE, responder_gives: EMPTY_SIDE };
  return offers.map((offer) => {
    const deltas = [
      sideDelta(previous.initiator_gives, offer.bundle.initiator_gives, initiator_id, 'initiator'),
      sideDelta(previous.responder_gives, offer.bundle.responder_gives, responder_id, 'responder'),
    ];
    previous = offer.bundle;
    return { round: offer.round, offer_id: offer.offer_id, proposed_by: offer.proposed_by, deltas };
  });
}
