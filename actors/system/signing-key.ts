import type { AlarmMessage, SnapshotActorDefinition, TurnContext, TurnResult } from '../../runtime/index.js';

/**
 * The token signing key, kept as an actor so every node of a cluster signs
 * and verifies with the same key and it survives restarts. The first node to
 * start proposes a freshly generated key; the actor keeps the first proposal
 * it receives and returns that one to everybody after.
 */
export interface SigningKey {
  kid: string;
  private_jwk: Record<string, unknown>;
  public_jwk: Record<string, unknown>;
  created_at_ms: number;
}

export type SigningKeyMessage = { op: 'init'; candidate: Omit<SigningKey, 'created_at_ms'> };

export const SIGNING_KEY_KIND = 'signing-key';
export const SIGNING_KEY_KEY = 'primary';

export function stepSigningKey(
  state: SigningKey | null,
  message: SigningKeyMessage | AlarmMessage,
  context: TurnContext,
): TurnResult<SigningKey | null, SigningKey | null> {
  if (message.op === 'init' && state === null) {
    const key: SigningKey = { ...message.candidate, created_at_ms: context.now };
    return { state: key, reply: key };
  }
  return { state, reply: state };
}

export const signingKeyActor: SnapshotActorDefinition<SigningKey | null, SigningKeyMessage, SigningKey | null> = {
  kind: SIGNING_KEY_KIND,
  storage: 'snapshot',
  initial: () => null,
  step: stepSigningKey,
};
