import { isAlarm, ServiceError, type AlarmMessage, type RecordWrite, type TurnContext, type TurnResult } from '../../runtime/index.js';
import { listRows, type FieldType } from './list-query.js';
import {
  canonicalEndpoint,
  isModuleName,
  isSupportTierName,
  NO_SUPPORT_TIER,
  rateLimitPolicy,
  type Changed,
  type Limit,
  type ListQuery,
  type ListView,
  type OverviewView,
  type RulesMessage,
  type RuleSetView,
  type SupportTierView,
  type TierView,
  type UserRateLimitView,
} from './messages.js';

/**
 * The platform's rate-limit rules, one `records` actor: each tier and each
 * user setting is one record, so a change writes O(1). Every change bumps
 * `version` (record `meta`); the edge caches the rule set and re-reads it
 * only when the version moved. Checks happen before any mutation (the
 * records contract: a rejected turn leaves nothing behind).
 */
export interface RulesState {
  version: number;
  cache_epoch: number;
  default_tier: TierView | null;
  /** Canonical template -> tier (its name is the template as given). */
  endpoints: Map<string, TierView>;
  modules: Map<string, TierView>;
  support: Map<string, SupportTierView>;
  users: Map<string, UserRateLimitView>;
  /** The rule set's view, built once per version. */
  cached: RuleSetView | null;
}

type Result = TurnResult<RulesState, unknown>;

export function loadRulesState(_key: string, records: Iterable<[string, unknown]>): RulesState {
  const state = emptyRulesState();
  for (const [subkey, value] of records) {
    if (subkey === 'meta') {
      const meta = value as { version: number; cache_epoch: number };
      state.version = meta.version;
      state.cache_epoch = meta.cache_epoch;
    } else if (subkey === 'default') state.default_tier = value as TierView;
    else if (subkey.startsWith('e:')) state.endpoints.set(subkey.slice(2), value as TierView);
    else if (subkey.startsWith('m:')) state.modules.set(subkey.slice(2), value as TierView);
    else if (subkey.startsWith('s:')) state.support.set(subkey.slice(2), value as SupportTierView);
    else if (subkey.startsWith('u:')) state.users.set(subkey.slice(2), value as UserRateLimitView);
  }
  return state;
}

export function emptyRulesState(): RulesState {
  return { version: 0, cache_epoch: 0, default_tier: null, endpoints: new Map(), modules: new Map(), support: new Map(), users: new Map(), cached: null };
}

function bad(field: string, message: string): ServiceError {
  return new ServiceError('BAD_REQUEST', `${field}: ${message}`, { details: [{ field, message }] });
}

function checkLimit(limit: Limit, field = 'body'): Limit {
  if (!Number.isSafeInteger(limit.max_requests) || limit.max_requests < 1 || limit.max_requests > rateLimitPolicy.max_requests_max) {
    throw bad(`${field}.max_requests`, `must be an integer from 1 to ${rateLimitPolicy.max_requests_max}`);
  }
  if (!Number.isSafeInteger(limit.window_seconds) || limit.window_seconds < 1 || limit.window_seconds > rateLimitPolicy.window_seconds_max) {
    throw bad(`${field}.window_seconds`, `must be an integer from 1 to ${rateLimitPolicy.window_seconds_max}`);
  }
  return { max_requests: limit.max_requests, window_seconds: limit.window_seconds };
}

/** The record key of an endpoint or module tier, or a 400 when the name is not one. */
function tierKey(tier_type: 'endpoint' | 'module', name: string): string {
  if (tier_type === 'endpoint') {
    const canonical = canonicalEndpoint(name);
    if (canonical === null) throw bad('endpoint_path', 'must be a route path template starting with / (parameters as {name}), without query or spaces');
    return canonical;
  }
  if (!isModuleName(name)) throw bad('module', `must be 1-${rateLimitPolicy.module_length_max} letters, digits, _ . -`);
  return name;
}

function tiersOf(state: RulesState, tier_type: 'endpoint' | 'module'): Map<string, TierView> {
  return tier_type === 'endpoint' ? state.endpoints : state.modules;
}

function recordKey(tier_type: 'endpoint' | 'module', key: string): string {
  return `${tier_type === 'endpoint' ? 'e' : 'm'}:${key}`;
}

/** Custom limits as given, checked: templates valid, no two naming the same endpoint, each limit in range. */
function checkCustomLimits(custom: Record<string, Limit>): Record<string, Limit> {
  const entries = Object.entries(custom);
  if (entries.length > rateLimitPolicy.custom_limits_per_user_max) throw bad('custom_limits', `at most ${rateLimitPolicy.custom_limits_per_user_max} endpoints`);
  const seen = new Set<string>();
  const checked: Record<string, Limit> = {};
  for (const [path, limit] of entries) {
    const canonical = canonicalEndpoint(path);
    if (canonical === null) throw bad(`custom_limits.${path}`, 'must be a route path template starting with /');
    if (seen.has(canonical)) throw bad(`custom_limits.${path}`, 'names the same endpoint as another key');
    seen.add(canonical);
    checked[path] = checkLimit(limit, `custom_limits.${path}`);
  }
  return checked;
}

function checkUserId(user_id: string): void {
  if (user_id.length < 1 || user_id.length > rateLimitPolicy.user_id_length_max || /[\u0000-\u001f\u007f]/.test(user_id)) {
    throw bad('user_id', `must be 1-${rateLimitPolicy.user_id_length_max} printable characters`);
  }
}

function checkUserTier(state: RulesState, tier: string): void {
  if (tier !== NO_SUPPORT_TIER && !state.support.has(tier)) throw bad('tier', `no support tier named ${tier} (use ${NO_SUPPORT_TIER} or create the support tier first)`);
}

/** A change: bump the version, drop the cached rule set, write the meta record with the change's records. */
function changed<T>(state: RulesState, value: T, writes: RecordWrite[]): Result {
  state.version += 1;
  state.cached = null;
  const reply: Changed<T> = { version: state.version, value };
  return { state, reply, writes: [...writes, { subkey: 'meta', value: { version: state.version, cache_epoch: state.cache_epoch } }] };
}

export function ruleSetOf(state: RulesState): RuleSetView {
  if (state.cached) return state.cached;
  const limit = (tier: Limit): Limit => ({ max_requests: tier.max_requests, window_seconds: tier.window_seconds });
  const rules: RuleSetView = {
    version: state.version,
    cache_epoch: state.cache_epoch,
    default_tier: state.default_tier ? limit(state.default_tier) : null,
    endpoints: Object.fromEntries([...state.endpoints].map(([key, tier]) => [key, limit(tier)])),
    modules: Object.fromEntries([...state.modules].map(([key, tier]) => [key, limit(tier)])),
    support_tiers: Object.fromEntries([...state.support].map(([key, tier]) => [key, limit(tier)])),
    users: Object.fromEntries(
      [...state.users].map(([key, user]) => [
        key,
        {
          tier: user.tier,
          bypass: user.bypass,
          custom_limits: Object.fromEntries(Object.entries(user.custom_limits).map(([path, custom]) => [canonicalEndpoint(path)!, limit(custom)])),
        },
      ]),
    ),
  };
  state.cached = rules;
  return rules;
}

const TIER_FIELDS: Record<string, FieldType> = {
  id: 'text',
  name: 'text',
  tier_type: 'text',
  max_requests: 'number',
  window_seconds: 'number',
  created_at: 'time',
  updated_at: 'time',
};
const SUPPORT_FIELDS: Record<string, FieldType> = {
  name: 'text',
  description: 'text',
  max_requests: 'number',
  window_seconds: 'number',
  created_at: 'time',
  updated_at: 'time',
};
const USER_FIELDS: Record<string, FieldType> = { user_id: 'text', tier: 'text', bypass: 'boolean', created_at: 'time', updated_at: 'time' };

function listTiers(state: RulesState, message: Extract<RulesMessage, { op: 'list_tiers' }>, query: ListQuery): ListView<TierView> {
  const pool: TierView[] = [];
  if (message.include.includes('default') && state.default_tier) pool.push(state.default_tier);
  if (message.include.includes(message.tier_type)) pool.push(...tiersOf(state, message.tier_type).values());
  return listRows(
    pool,
    (tier) => ({ ...tier, created_at: tier.created_at_ms, updated_at: tier.updated_at_ms }),
    TIER_FIELDS,
    ['name', 'id'],
    'id',
    'name',
    query,
  );
}

function tierNotFound(tier_type: string, name: string): ServiceError {
  return new ServiceError('not_found', `No ${tier_type} tier ${JSON.stringify(name)}.`);
}

export function stepRules(state: RulesState, message: RulesMessage | AlarmMessage, context: TurnContext): Result {
  if (isAlarm(message)) return { state };
  const now = context.now;
  switch (message.op) {
    case 'rules':
      return { state, reply: message.known_version === state.version ? null : ruleSetOf(state) };
    case 'overview': {
      const reply: OverviewView = {
        default_tier: state.default_tier,
        endpoint_tiers: [...state.endpoints.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
        module_tiers: [...state.modules.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
        support_tiers: [...state.support.values()].sort((a, b) => (a.name < b.name ? -1 : 1)),
        user_count: state.users.size,
      };
      return { state, reply };
    }
    case 'clear_cache':
      state.cache_epoch += 1;
      return changed(state, null, []);
    case 'get_default':
      return { state, reply: state.default_tier };
    case 'put_default': {
      const limit = checkLimit(message.limit);
      const tier: TierView = {
        id: 'default',
        name: 'default',
        tier_type: 'default',
        ...limit,
        created_at_ms: state.default_tier?.created_at_ms ?? now,
        updated_at_ms: now,
      };
      state.default_tier = tier;
      return changed(state, tier, [{ subkey: 'default', value: tier }]);
    }
    case 'create_tier': {
      const key = tierKey(message.tier_type, message.name);
      const limit = checkLimit(message.limit);
      const tiers = tiersOf(state, message.tier_type);
      if (tiers.has(key)) throw new ServiceError('rate_limit_tier_exists', `A ${message.tier_type} tier for ${JSON.stringify(message.name)} already exists; change it with PUT.`);
      const max = message.tier_type === 'endpoint' ? rateLimitPolicy.endpoint_tiers_max : rateLimitPolicy.module_tiers_max;
      if (tiers.size >= max) throw new ServiceError('rate_limit_rules_full', `At most ${max} ${message.tier_type} tiers.`);
      const tier: TierView = { id: context.newId('rlt_'), name: message.name, tier_type: message.tier_type, ...limit, created_at_ms: now, updated_at_ms: now };
      tiers.set(key, tier);
      return changed(state, tier, [{ subkey: recordKey(message.tier_type, key), value: tier }]);
    }
    case 'get_tier': {
      const tier = tiersOf(state, message.tier_type).get(tierKey(message.tier_type, message.name));
      if (!tier) throw tierNotFound(message.tier_type, message.name);
      return { state, reply: tier };
    }
    case 'put_tier': {
      const key = tierKey(message.tier_type, message.name);
      const limit = checkLimit(message.limit);
      const tiers = tiersOf(state, message.tier_type);
      const existing = tiers.get(key);
      if (!existing) throw tierNotFound(message.tier_type, message.name);
      const tier: TierView = { ...existing, ...limit, updated_at_ms: now };
      tiers.set(key, tier);
      return changed(state, tier, [{ subkey: recordKey(message.tier_type, key), value: tier }]);
    }
    case 'delete_tier': {
      const key = tierKey(message.tier_type, message.name);
      const tiers = tiersOf(state, message.tier_type);
      if (!tiers.has(key)) throw tierNotFound(message.tier_type, message.name);
      tiers.delete(key);
      return changed(state, null, [{ subkey: recordKey(message.tier_type, key), value: undefined }]);
    }
    case 'list_tiers':
      return { state, reply: listTiers(state, message, message.query) };
    case 'create_support_tier': {
      if (!isSupportTierName(message.name)) throw bad('name', `must be 1-${rateLimitPolicy.name_length_max} letters, digits, _ . - and not ${NO_SUPPORT_TIER}`);
      const limit = checkLimit(message.limit);
      if (message.description.length > rateLimitPolicy.description_length_max) throw bad('description', `at most ${rateLimitPolicy.description_length_max} characters`);
      if (state.support.has(message.name)) throw new ServiceError('rate_limit_tier_exists', `A support tier named ${message.name} already exists; change it with PUT.`);
      if (state.support.size >= rateLimitPolicy.support_tiers_max) throw new ServiceError('rate_limit_rules_full', `At most ${rateLimitPolicy.support_tiers_max} support tiers.`);
      const tier: SupportTierView = { name: message.name, description: message.description, ...limit, created_at_ms: now, updated_at_ms: now };
      state.support.set(message.name, tier);
      return changed(state, tier, [{ subkey: `s:${message.name}`, value: tier }]);
    }
    case 'get_support_tier': {
      const tier = state.support.get(message.name);
      if (!tier) throw tierNotFound('support', message.name);
      return { state, reply: tier };
    }
    case 'put_support_tier': {
      const existing = state.support.get(message.name);
      if (!existing) throw tierNotFound('support', message.name);
      const limit = checkLimit(message.limit);
      if (message.description !== undefined && message.description.length > rateLimitPolicy.description_length_max) throw bad('description', `at most ${rateLimitPolicy.description_length_max} characters`);
      const tier: SupportTierView = { ...existing, ...limit, description: message.description ?? existing.description, updated_at_ms: now };
      state.support.set(message.name, tier);
      return changed(state, tier, [{ subkey: `s:${message.name}`, value: tier }]);
    }
    case 'delete_support_tier': {
      if (!state.support.has(message.name)) throw tierNotFound('support', message.name);
      let users = 0;
      for (const user of state.users.values()) if (user.tier === message.name) users++;
      if (users > 0) throw new ServiceError('rate_limit_tier_in_use', `${users} user setting(s) name the support tier ${message.name}; move them to another tier first.`, { details: { user_count: users } });
      state.support.delete(message.name);
      return changed(state, null, [{ subkey: `s:${message.name}`, value: undefined }]);
    }
    case 'list_support_tiers':
      return {
        state,
        reply: listRows(
          [...state.support.values()],
          (tier) => ({ ...tier, created_at: tier.created_at_ms, updated_at: tier.updated_at_ms }),
          SUPPORT_FIELDS,
          ['name', 'description'],
          'name',
          'name',
          message.query,
        ),
      };
    case 'create_user':
    case 'put_user': {
      checkUserId(message.user_id);
      checkUserTier(state, message.tier);
      const custom_limits = checkCustomLimits(message.custom_limits);
      const existing = state.users.get(message.user_id);
      if (existing && message.op === 'create_user') throw new ServiceError('rate_limit_user_exists', `User ${message.user_id} already has rate-limit settings; change them with PUT.`);
      if (!existing && state.users.size >= rateLimitPolicy.users_max) throw new ServiceError('rate_limit_rules_full', `At most ${rateLimitPolicy.users_max} users with settings.`);
      const user: UserRateLimitView = {
        user_id: message.user_id,
        tier: message.tier,
        bypass: message.bypass,
        custom_limits,
        created_at_ms: existing?.created_at_ms ?? now,
        updated_at_ms: now,
      };
      state.users.set(message.user_id, user);
      return changed(state, { user, created: !existing }, [{ subkey: `u:${message.user_id}`, value: user }]);
    }
    case 'get_user': {
      const user = state.users.get(message.user_id);
      if (!user) throw new ServiceError('not_found', `User ${message.user_id} has no rate-limit settings.`);
      return { state, reply: user };
    }
    case 'delete_user': {
      if (!state.users.has(message.user_id)) throw new ServiceError('not_found', `User ${message.user_id} has no rate-limit settings.`);
      state.users.delete(message.user_id);
      return changed(state, null, [{ subkey: `u:${message.user_id}`, value: undefined }]);
    }
    case 'list_users': {
      const users = [...state.users.values()].filter(
        (user) => (message.tier === undefined || user.tier === message.tier) && (message.bypass === undefined || user.bypass === message.bypass),
      );
      return {
        state,
        reply: listRows(
          users,
          (user) => ({ user_id: user.user_id, tier: user.tier, bypass: user.bypass, created_at: user.created_at_ms, updated_at: user.updated_at_ms }),
          USER_FIELDS,
          ['user_id', 'tier'],
          'user_id',
          'created_at',
          message.query,
        ),
      };
    }
  }
}

