import type { RecordWrite } from '../../runtime/index.js';
import { initialTalentUserState, type TalentUserState } from './user-state.js';

/**
 * How a user's talent state is stored: as keyed records, so a turn writes
 * only what it changed (an allocation rewrites one tree's record and the
 * wallet, not every tree copy and event id the user has).
 *
 * | subkey | value |
 * |---|---|
 * | `w` | the wallet: balances, earned, fees paid, XP per curve |
 * | `c:<curve_id>` | the copy of a curve |
 * | `e:<event_id>` | a remembered XP event (fingerprint, first result, time) |
 * | `t:<tree_id>` | the allocation in a tree with the copy of its version |
 * | `p:<flow_id>` | a request waiting for a curve or tree answer |
 *
 * The step functions treat the state as immutable, so what changed is found
 * by comparing references.
 */
const WALLET = 'w';
const maps = { c: 'curves', e: 'events', t: 'trees', p: 'pending' } as const;
type MapField = (typeof maps)[keyof typeof maps];

export function loadTalentUser(_key: string, records: Iterable<[string, unknown]>): TalentUserState {
  const state = initialTalentUserState();
  for (const [subkey, value] of records) {
    if (subkey === WALLET) {
      const wallet = value as Pick<TalentUserState, 'earned' | 'balances' | 'fees_paid' | 'xp'>;
      Object.assign(state, { earned: wallet.earned, balances: wallet.balances, fees_paid: wallet.fees_paid, xp: wallet.xp });
      continue;
    }
    const field = maps[subkey.slice(0, 1) as keyof typeof maps];
    if (field) (state[field] as Record<string, unknown>)[subkey.slice(2)] = value;
  }
  return state;
}

/** The records a turn changed, from the state before and after it. */
export function talentUserWrites(before: TalentUserState, after: TalentUserState): RecordWrite[] {
  if (before === after) return [];
  const writes: RecordWrite[] = [];
  if (before.earned !== after.earned || before.balances !== after.balances || before.fees_paid !== after.fees_paid || before.xp !== after.xp) {
    writes.push({ subkey: WALLET, value: { earned: after.earned, balances: after.balances, fees_paid: after.fees_paid, xp: after.xp } });
  }
  for (const [prefix, field] of Object.entries(maps) as [string, MapField][]) {
    const old = before[field] as Record<string, unknown>;
    const next = after[field] as Record<string, unknown>;
    if (old === next) continue;
    for (const id of Object.keys(next)) if (old[id] !== next[id]) writes.push({ subkey: `${prefix}:${id}`, value: next[id] });
    for (const id of Object.keys(old)) if (!(id in next)) writes.push({ subkey: `${prefix}:${id}`, value: undefined });
  }
  return writes;
}
