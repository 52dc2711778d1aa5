import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { initialContainerState, stepContainer, usageOf, type ContainerState } from '../../actors/items/container-state.js';
import { lockedUnits } from '../../actors/items/custody.js';
import { ITEM_CONTAINER_KIND, itemContainerKey, type ContainerConfig, type ContainerMessage, type PlacementUnit } from '../../actors/items/messages.js';
import type { ActorSend } from '../../runtime/index.js';
import { codeOf, fixedContext } from '../helpers/step.js';

/**
 * Custody under random sequences (fast-check): grants, crafts' reservations,
 * crafts in place, merges, locks, unlocks, rooms and transfers between two containers, with
 * the transfers' arrivals delivered late, in any order, some twice. Items are
 * never duplicated or lost (the units per definition in both containers,
 * counting reservations and arrivals in flight, change only by grants and
 * committed crafts), locked units never exceed their item, and the slot and
 * weight limits hold.
 */
const units: PlacementUnit[] = [
  { definition_id: 'ore', stackable: true, max_stack: 5, weight_m: 1_000, volume_m: 0, durability: null, collection_tags: [] },
  { definition_id: 'sword', stackable: false, max_stack: 1, weight_m: 3_000, volume_m: 0, durability: { current: 5, max: 5 }, collection_tags: [] },
];
const configs: ContainerConfig[] = ['a', 'b'].map((id) => ({ container_id: id, kind: 'slotted', owner_id: `owner-${id}`, parent_container_id: null, slots: 6, max_weight_m: 20_000, max_volume_m: null, created_at_ms: 0 }));
const holder = { area: 'test', ref: 'p' };

type Command =
  | { kind: 'grant'; at: number; unit: number; quantity: number }
  | { kind: 'lock'; at: number; pick: number; quantity: number }
  | { kind: 'unlock'; at: number; pick: number }
  | { kind: 'transfer'; at: number; pick: number }
  /** A craft's reservation, committed or released at once, or (`later`) left open until a `settle`: transfers and merges run meanwhile. */
  | { kind: 'reserve'; at: number; unit: number; quantity: number; commit: boolean; later: boolean }
  | { kind: 'settle'; pick: number }
  /** A craft in place: `quantity` of one unit into `output` of the other, one turn. */
  | { kind: 'in_place'; at: number; unit: number; quantity: number; output: number }
  | { kind: 'merge'; at: number; source: number; target: number }
  | { kind: 'arrive'; pick: number; twice: boolean };

const at = fc.integer({ min: 0, max: 1 });
const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('grant' as const), at, unit: fc.integer({ min: 0, max: 1 }), quantity: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('lock' as const), at, pick: fc.nat(), quantity: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('unlock' as const), at, pick: fc.nat() }),
  fc.record({ kind: fc.constant('transfer' as const), at, pick: fc.nat() }),
  fc.record({ kind: fc.constant('reserve' as const), at, unit: fc.integer({ min: 0, max: 1 }), quantity: fc.integer({ min: 1, max: 4 }), commit: fc.boolean(), later: fc.boolean() }),
  fc.record({ kind: fc.constant('settle' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('in_place' as const), at, unit: fc.integer({ min: 0, max: 1 }), quantity: fc.integer({ min: 1, max: 6 }), output: fc.integer({ min: 0, max: 4 }) }),
  fc.record({ kind: fc.constant('merge' as const), at, source: fc.nat(), target: fc.nat() }),
  fc.record({ kind: fc.constant('arrive' as const), pick: fc.nat(), twice: fc.boolean() }),
);

describe('items custody property', () => {
  it('conserves items and keeps locks and limits under random locks, transfers and crafts', () => {
    let transfers = 0;
    fc.assert(
      fc.property(fc.array(command, { minLength: 20, maxLength: 60 }), (commands) => {
        const states: ContainerState[] = [initialContainerState(), initialContainerState()];
        const expected = new Map<string, number>();
        const inFlight: ActorSend[] = [];
        const open: { at: number; flow_id: string; definition_id: string; quantity: number; commit: boolean }[] = [];
        let seq = 0;
        const run = (index: number, message: ContainerMessage) => {
          const context = fixedContext(1_000 + ++seq, ITEM_CONTAINER_KIND, itemContainerKey('t', 'd', configs[index].container_id));
          try {
            const result = stepContainer(states[index], message, context);
            inFlight.push(...(result.sends ?? []));
            return result.reply as any;
          } catch (error) {
            codeOf(() => {
              throw error;
            });
            return undefined;
          }
        };
        /** Ends an open reservation as its craft would: commit (the inputs are consumed) or release (they come back). */
        const settle = (index: number) => {
          const [reservation] = open.splice(index, 1);
          run(reservation.at, { op: reservation.commit ? 'commit' : 'release', flow_id: reservation.flow_id });
          if (reservation.commit) expected.set(reservation.definition_id, expected.get(reservation.definition_id)! - reservation.quantity);
        };
        const heldLocks = (index: number) => [...states[index].locks.values()].filter((lock) => lock.status === 'held');
        for (const c of commands) {
          switch (c.kind) {
            case 'grant': {
              const placed = run(c.at, { op: 'place', config: configs[c.at], placements: [{ unit: units[c.unit], quantity: c.quantity }] });
              if (placed) expected.set(units[c.unit].definition_id, (expected.get(units[c.unit].definition_id) ?? 0) + c.quantity);
              break;
            }
            case 'lock': {
              const items = [...states[c.at].items.values()];
              if (items.length === 0) break;
              const item = items[c.pick % items.length];
              run(c.at, { op: 'lock', lock_id: `L${++seq}`, item_id: item.item_id, quantity: c.quantity, owner_id: `owner-${configs[c.at].container_id}`, holder });
              break;
            }
            case 'unlock': {
              const locks = heldLocks(c.at);
              if (locks.length > 0) run(c.at, { op: 'unlock', lock_id: locks[c.pick % locks.length].lock_id });
              break;
            }
            case 'transfer': {
              if (heldLocks(c.at).length === 0) {
                // Nothing locked here yet: lock the free units of an item first, as a flow's stage would.
                const locked = lockedUnits(states[c.at]);
                const free = [...states[c.at].items.values()].filter((item) => item.quantity > (locked.get(item.item_id) ?? 0));
                if (free.length === 0) break;
                const item = free[c.pick % free.length];
                run(c.at, { op: 'lock', lock_id: `L${++seq}`, item_id: item.item_id, quantity: item.quantity - (locked.get(item.item_id) ?? 0), owner_id: `owner-${configs[c.at].container_id}`, holder });
              }
              const locks = heldLocks(c.at);
              const lock = locks[c.pick % locks.length];
              const to = 1 - c.at;
              // As a trade does: room first (refused when the target is full), then the transfer into it.
              const room_id = `R${++seq}`;
              const held = run(to, { op: 'reserve_room', room_id, config: configs[to], owner_id: `owner-${configs[to].container_id}`, units: [{ weight_m: lock.item!.unit_weight_m * lock.quantity, volume_m: 0 }], holder });
              if (!held) break;
              if (run(c.at, { op: 'transfer', lock_id: lock.lock_id, to: { container_id: configs[to].container_id, config: configs[to], room_id } })?.transferred) transfers++;
              break;
            }
            case 'reserve': {
              const flow_id = `F${++seq}`;
              if (!run(c.at, { op: 'reserve', flow_id, inputs: [{ definition_id: units[c.unit].definition_id, quantity: c.quantity }] })) break;
              open.push({ at: c.at, flow_id, definition_id: units[c.unit].definition_id, quantity: c.quantity, commit: c.commit });
              if (!c.later) settle(open.length - 1);
              break;
            }
            case 'settle': {
              if (open.length > 0) settle(c.pick % open.length);
              break;
            }
            case 'in_place': {
              const input = units[c.unit].definition_id;
              const output = units[1 - c.unit];
              const placements = c.output === 0 ? [] : [{ unit: output, quantity: c.output }];
              if (!run(c.at, { op: 'craft_in_place', inputs: [{ definition_id: input, quantity: c.quantity }], config: configs[c.at], placements })) break;
              expected.set(input, expected.get(input)! - c.quantity);
              expected.set(output.definition_id, (expected.get(output.definition_id) ?? 0) + c.output);
              break;
            }
            case 'merge': {
              const items = [...states[c.at].items.values()];
              if (items.length < 2) break;
              run(c.at, { op: 'merge', source_item_id: items[c.source % items.length].item_id, target_item_id: items[c.target % items.length].item_id, quantity: null });
              break;
            }
            case 'arrive': {
              if (inFlight.length === 0) break;
              const send = c.twice ? inFlight[c.pick % inFlight.length] : inFlight.splice(c.pick % inFlight.length, 1)[0];
              run(send.key === itemContainerKey('t', 'd', 'a') ? 0 : 1, send.message as ContainerMessage);
              break;
            }
          }
          // Invariants after every step.
          for (const [index, state] of states.entries()) {
            for (const [item_id, locked] of lockedUnits(state)) expect(locked).toBeLessThanOrEqual(state.items.get(item_id)!.quantity);
            const usage = usageOf(state);
            expect(usage.slots_used).toBeLessThanOrEqual(configs[index].slots);
            expect(usage.weight_m).toBeLessThanOrEqual(configs[index].max_weight_m!);
          }
        }
        // End the reservations still open, deliver everything still in flight (twice each), then count.
        while (open.length > 0) settle(0);
        for (const send of [...inFlight, ...inFlight]) run(send.key === itemContainerKey('t', 'd', 'a') ? 0 : 1, send.message as ContainerMessage);
        const counted = new Map<string, number>();
        for (const state of states) for (const item of state.items.values()) counted.set(item.definition_id, (counted.get(item.definition_id) ?? 0) + item.quantity);
        for (const definition_id of ['ore', 'sword']) expect(counted.get(definition_id) ?? 0).toBe(expected.get(definition_id) ?? 0);
        // Item ids are unique across both containers.
        const ids = states.flatMap((state) => [...state.items.keys()]);
        expect(new Set(ids).size).toBe(ids.length);
      }),
      { numRuns: 200 },
    );
    expect(transfers, 'the sequences transfer items').toBeGreaterThan(50);
  });
});
