import { describe, expect, it } from 'vitest';
import { loadAuctionIndex, stepAuctionIndex, type AuctionIndexState } from '../../actors/auctions/index-state.js';
import type { AuctionIndexMessage, AuctionSpec, AuctionView } from '../../actors/auctions/messages.js';
import type { FlowAnswer } from '../../actors/flow-call.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/** The tenant's auction index: batches all or nothing, one live auction per item, removals that stay removed. */
const spec = (auction_id: string, item_id: string): AuctionSpec => ({
  auction_id, item_id, currency: 'USD', starting_price: 1, bid_increment: 1, reserve_price: null, buy_it_now_price: null, soft_close_seconds: 0, start_ms: 0, end_ms: 10,
});
const view = (auction_id: string, item_id: string, version: number, status: AuctionView['status']) =>
  ({ ...spec(auction_id, item_id), tenant: 't', auction_type: 'english', seller_id: 's', status, current_price: 1, high_bidder: null, total_bids: 0, original_end_ms: 10, final_price: null, winner_id: null, reserve_met: true, created_at_ms: 0, updated_at_ms: 0, settlement: null, version }) as AuctionView;

function run(state: AuctionIndexState, message: AuctionIndexMessage, request_id: string | null = null) {
  return stepAuctionIndex(state, message, { ...fixedContext(0, 'auction-index', '["t"]'), request_id });
}
const create = (state: AuctionIndexState, specs: AuctionSpec[]) => run(state, { op: 'create', tenant: 't', seller_id: 's', specs }, 'req');

describe('auction index', () => {
  it('creates a batch, answering once every auction answered', () => {
    const state = loadAuctionIndex('["t"]', []);
    const started = create(state, [spec('a', 'i1'), spec('b', 'i2')]);
    expect(started.defer).toBe(true);
    expect(started.sends!.map((send) => send.key)).toEqual(['["t","a"]', '["t","b"]']);
    const flow_id = (started.sends![0].message as { reply_to: { flow_id: string } }).reply_to.flow_id;
    const answer = (id: string): FlowAnswer => ({ op: 'flow-answer', flow_id, step: id, ok: true, reply: view(id, id === 'a' ? 'i1' : 'i2', 1, 'open') });
    expect(run(state, answer('a')).replies ?? []).toEqual([]);
    expect(run(state, answer('a')).replies ?? []).toEqual([]); // a repeat changes nothing
    expect(run(state, answer('b')).replies).toEqual([{ request_id: 'req', reply: { auction_ids: ['a', 'b'], auctions: [expect.objectContaining({ auction_id: 'a' }), expect.objectContaining({ auction_id: 'b' })] } }]);
  });

  it('refuses a whole batch when one item is live or repeated, creating nothing', () => {
    const state = loadAuctionIndex('["t"]', []);
    create(state, [spec('a', 'i1')]);
    expect(codeOf(() => create(state, [spec('b', 'i2'), spec('c', 'i1')]))).toBe('auction_item_conflict');
    expect(codeOf(() => create(state, [spec('d', 'i3'), spec('e', 'i3')]))).toBe('auction_item_conflict');
    expect([...state.items.keys()]).toEqual(['i1']);
  });

  it('frees an item when its auction is settled, cancelled or deleted; a late summary does not bring back a deleted auction', () => {
    const state = loadAuctionIndex('["t"]', []);
    create(state, [spec('a', 'i1'), spec('b', 'i2')]);
    run(state, { op: 'upsert', entry: view('a', 'i1', 2, 'open') });
    run(state, { op: 'upsert', entry: view('a', 'i1', 5, 'settled') });
    run(state, { op: 'upsert', entry: view('a', 'i1', 4, 'open') }); // older: ignored
    expect(state.entries.get('a')!.status).toBe('settled');
    expect(state.items.has('i1')).toBe(false);
    run(state, { op: 'upsert', entry: view('b', 'i2', 2, 'open') });
    run(state, { op: 'remove', auction_id: 'b' });
    run(state, { op: 'upsert', entry: view('b', 'i2', 3, 'open') });
    expect(state.entries.has('b')).toBe(false);
    expect(state.items.has('i2')).toBe(false);
  });
});
