import type { RecordsActorDefinition } from '../../runtime/index.js';
import { loadAccount, stepAccount, type AccountState } from './account-state.js';
import { LEDGER_ACCOUNT_KIND, type LedgerAccountMessage } from './messages.js';

/** One account (key = ledgerAccountKey(tenant, user_id)): balances per currency, holds, credits. */
export const ledgerAccountActor: RecordsActorDefinition<AccountState, LedgerAccountMessage, unknown> = {
  kind: LEDGER_ACCOUNT_KIND,
  storage: 'records',
  load: loadAccount,
  step: stepAccount,
};

export const ledgerActors = [ledgerAccountActor];
