import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import {
  FILTER_FIELDS,
  FILTER_OPERATORS,
  WAITING_ROOM_DIRECTORY_KIND,
  WAITING_ROOM_KIND,
  waitingRoomDirectoryKey,
  waitingRoomKey,
  waitingRoomLimits as limits,
  type AdmitView,
  type AnalyticsView,
  type BanView,
  type GroupStatusView,
  type MembersView,
  type MemberView,
  type PositionView,
  type RoomConfig,
  type RoomDetailView,
  type RoomFilter,
  type RoomListView,
  type RoomMessage,
  type RoomSummary,
} from '../../actors/waiting-rooms/messages.js';
import { isServiceError } from '../../runtime/index.js';
import { bearerAuthentication, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, isoTime, Pagination } from '../schemas.js';
import type { AppServices } from '../services.js';
import { parseListFilters } from '../list-filters.js';
import { requireAdmin } from './admin.js';

/** Waiting rooms (spec doc 1 §2, §3 and §4.10; conventions "Waiting room"). Reference: docs/api/waiting-rooms.md. */
const ROOM_ID = Type.String({ minLength: 1, maxLength: limits.room_id_length_max, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' });
const MEMBER_ID = Type.String({ minLength: 1, maxLength: limits.member_id_length_max, pattern: '^[^\\u0000-\\u001f\\u007f]+$' });
const GROUP_ID = Type.String({ minLength: 1, maxLength: limits.group_name_length_max });
const REASON = Type.String({ minLength: 1, maxLength: limits.reason_length_max });
const Metadata = Type.Record(Type.String(), Type.Unknown());
const Ts = Type.String({ format: 'date-time' });
const NullableTs = Type.Union([Ts, Type.Null()]);
const Nullable = (schema: TSchema) => Type.Union([schema, Type.Null()]);

const RoomParams = Type.Object({ room_id: ROOM_ID });
const GroupParams = Type.Object({ room_id: ROOM_ID, group_id: GROUP_ID });
const BanParams = Type.Object({ room_id: ROOM_ID, member_id: MEMBER_ID });
const MemberParams = Type.Object({ member_id: MEMBER_ID });

const PriorityGroupInput = Type.Object({
  name: GROUP_ID,
  boost: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.boost_max, description: 'Higher is served first; default 0.' })),
  match_rules: Type.Optional(Type.Unknown({ description: 'null (explicit-only group), a condition object, or a list of conditions (any). See docs/api/waiting-rooms.md.' })),
});
const CAPACITY = Type.Integer({ minimum: 1, maximum: limits.capacity_max });
const BATCH_SIZE = Type.Integer({ minimum: 1, maximum: limits.batch_size_max });
const INTERVAL = Type.Integer({ minimum: 1, maximum: limits.interval_seconds_max });
const TTL = Type.Integer({ minimum: 1, maximum: limits.session_ttl_seconds_max });
const AntiGamingInput = Type.Object({
  join_rate_limit_max_attempts: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.join_rate_limit_max_attempts_max, description: '0 turns the limit off.' })),
  join_rate_limit_window_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.join_rate_limit_window_seconds_max })),
  rejoin_cooldown_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.rejoin_cooldown_seconds_max })),
});
const STATUS = Type.Union([Type.Literal('active'), Type.Literal('paused')]);
const STRATEGY = Type.Union([Type.Literal('fifo')]);

const CreateBody = Type.Object({
  room_id: ROOM_ID,
  capacity: CAPACITY,
  admission_rate: Type.Object({ batch_size: BATCH_SIZE, interval_seconds: INTERVAL }),
  auto_admit: Type.Optional(Type.Boolean()),
  priority_groups: Type.Optional(Type.Array(PriorityGroupInput, { maxItems: limits.priority_groups_max })),
  queue_strategy: Type.Optional(STRATEGY),
  session_ttl_seconds: Type.Optional(TTL),
  anti_gaming: Type.Optional(AntiGamingInput),
  metadata: Type.Optional(Metadata),
  status: Type.Optional(STATUS),
});
const ReplaceBody = Type.Object({
  capacity: Type.Optional(CAPACITY),
  admission_rate: Type.Optional(Type.Object({ batch_size: Type.Optional(BATCH_SIZE), interval_seconds: Type.Optional(INTERVAL) })),
  auto_admit: Type.Optional(Type.Boolean()),
  priority_groups: Type.Optional(Type.Array(PriorityGroupInput, { maxItems: limits.priority_groups_max })),
  queue_strategy: Type.Optional(STRATEGY),
  session_ttl_seconds: Type.Optional(TTL),
  anti_gaming: Type.Optional(AntiGamingInput),
  metadata: Type.Optional(Metadata),
  status: Type.Optional(STATUS),
});

const RoomFields = {
  room_id: Type.String(),
  admission_rate: Type.Object({ batch_size: Type.Integer(), interval_seconds: Type.Integer() }),
  anti_gaming: Type.Object({
    join_rate_limit_max_attempts: Type.Integer(),
    join_rate_limit_window_seconds: Type.Integer(),
    rejoin_cooldown_seconds: Type.Integer(),
  }),
  auto_admit: Type.Boolean(),
  capacity: Type.Integer(),
  created_at: Ts,
  metadata: Metadata,
  priority_groups: Type.Array(Type.Object({ name: Type.String(), boost: Type.Integer(), match_rules: Type.Unknown() })),
  queue_strategy: Type.String(),
  session_ttl_seconds: Type.Integer(),
  status: Type.String(),
  updated_at: Ts,
};
const Room = Type.Object({ ...RoomFields, created_by: Type.String() }, { title: 'WaitingRoom' });
const RoomDetail = Type.Object(
  {
    ...RoomFields,
    statistics: Type.Object({
      active_count: Type.Integer(),
      average_wait_seconds: Type.Number(),
      current_admission_rate: Type.Number({ description: 'Members admitted per second over the last 10 minutes.' }),
      total_admitted: Type.Integer(),
      waiting_count: Type.Integer(),
    }),
  },
  { title: 'WaitingRoomDetail' },
);
const RoomSummarySchema = Type.Object({
  auto_admit: Type.Boolean(),
  capacity: Type.Integer(),
  created_at: Ts,
  created_by: Type.String(),
  queue_strategy: Type.String(),
  room_id: Type.String(),
  status: Type.String(),
  updated_at: Ts,
});

const ListQuery = Type.Object({
  q: Type.Optional(Type.String({ maxLength: 256 })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
  sort_by: Type.Optional(Type.Union([Type.Literal('created_at'), Type.Literal('updated_at'), Type.Literal('capacity')])),
  sort_order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
  filter: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 20 })),
});

const MemberBody = Type.Object({ member_id: Type.Optional(MEMBER_ID) });
const JoinBody = Type.Object({
  member_id: Type.Optional(MEMBER_ID),
  priority_group: Type.Optional(GROUP_ID),
  metadata: Type.Optional(Metadata),
});
const JoinReply = Type.Object({
  estimated_wait_seconds: Type.Integer(),
  joined_at: Ts,
  member_id: Type.String(),
  position: Type.Integer(),
  priority_group: Type.String(),
  room_id: Type.String(),
  status: Type.String(),
});
const PositionQuery = Type.Object({ member_id: Type.Optional(MEMBER_ID) });
const PositionReply = Type.Object({
  ahead_count: Type.Integer(),
  estimated_wait_seconds: Type.Integer(),
  joined_at: Ts,
  member_id: Type.String(),
  position: Type.Integer(),
  priority_effective: Type.Integer(),
  priority_group: Type.String(),
  room_id: Type.String(),
  status: Type.String({ description: 'waiting, active or rejected' }),
  expires_at: NullableTs,
  rejection_reason: Nullable(Type.String()),
});
const RefreshReply = Type.Object({ new_expiry: Type.Integer({ description: 'epoch-s' }), success: Type.Boolean() });

const AdmitBody = Type.Object({
  count: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.admit_count_max })),
  member_ids: Type.Optional(Type.Array(MEMBER_ID, { minItems: 1, maxItems: limits.member_ids_per_request_max })),
});
const AdmitReply = Type.Object({
  admitted: Type.Array(Type.Object({ admitted_at: Ts, member_id: Type.String(), wait_time_seconds: Type.Integer() })),
  capacity_reached: Type.Boolean(),
  failed: Type.Array(Type.Object({ member_id: Type.String(), reason: Type.String() })),
});
const RejectBody = Type.Object({
  member_ids: Type.Array(MEMBER_ID, { minItems: 1, maxItems: limits.member_ids_per_request_max }),
  reason: REASON,
});

const BanBody = Type.Object({
  member_id: MEMBER_ID,
  reason: REASON,
  duration_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: limits.ban_duration_seconds_max, description: 'Absent: permanent.' })),
  global: Type.Optional(Type.Boolean({ description: 'Also ban the member from every other room of the tenant.' })),
});
const Ban = Type.Object({
  banned_at: Ts,
  banned_by: Type.String(),
  banned_until: NullableTs,
  member_id: Type.String(),
  reason: Type.String(),
  room_id: Type.String(),
  global: Type.Boolean(),
  active: Type.Boolean(),
});
const BansQuery = Type.Object({ include_expired: Type.Boolean() });

const MembersQuery = Type.Object({
  status: Type.Optional(Type.Union([Type.Literal('waiting'), Type.Literal('active')])),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.members_page_max })),
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
});
const MemberItem = Type.Object({
  admitted_at: NullableTs,
  expires_at: NullableTs,
  group_id: Type.String(),
  joined_at: Ts,
  member_id: Type.String(),
  metadata: Metadata,
  position: Type.Integer(),
  priority: Type.Integer(),
  room_id: Type.String(),
  status: Type.String(),
});
const MembersReply = Type.Object({ limit: Type.Integer(), members: Type.Array(MemberItem), offset: Type.Integer(), total: Type.Integer() });

const GroupStatusQuery = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 0, maximum: limits.members_page_max })) });
const GroupStatusReply = Type.Object({
  average_position: Type.Integer(),
  can_be_admitted: Type.Boolean(),
  group_id: Type.String(),
  members: Type.Array(Type.Object({ joined_at: Ts, member_id: Type.String(), position: Type.Integer(), status: Type.String() })),
  members_active: Type.Integer(),
  members_waiting: Type.Integer(),
  total_members: Type.Integer(),
});

/** 9999-12-31T23:59:59Z: the last second an RFC 3339 timestamp can carry. */
const EPOCH_S_MAX = 253_402_300_799;
const AnalyticsQuery = Type.Object({
  start_time: Type.Optional(Type.Integer({ minimum: 0, maximum: EPOCH_S_MAX, description: 'epoch-s; default end_time - 24 h' })),
  end_time: Type.Optional(Type.Integer({ minimum: 0, maximum: EPOCH_S_MAX, description: 'epoch-s; default now' })),
  limit: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'Most recent hours returned; 0 or absent: up to 2160.' })),
});
const AnalyticsReply = Type.Object({
  hourly_stats: Type.Array(
    Type.Object({ abandonments: Type.Integer(), admissions: Type.Integer(), average_wait_time_seconds: Type.Number(), hour: Ts, rejections: Type.Integer() }),
  ),
  room_id: Type.String(),
  summary: Type.Object({
    abandonment_rate: Type.Number(),
    admission_rate: Type.Number(),
    average_wait_time_seconds: Type.Number(),
    max_wait_time_seconds: Type.Integer(),
    min_wait_time_seconds: Type.Integer(),
    rejection_rate: Type.Number(),
    total_abandonments: Type.Integer(),
    total_admissions: Type.Integer(),
    total_rejections: Type.Integer(),
  }),
  time_range: Type.Object({ end: Ts, start: Ts }),
});

type RoomParamsT = Static<typeof RoomParams>;

/** The administrators' list (GET /admin/waiting-rooms): one tenant's rooms with their statistics. */
const AdminListQuery = Type.Object({
  tenant: Type.String({ minLength: 1, maxLength: 128, pattern: '^[^\\u0000-\\u001f\\u007f]+$', description: 'The tenant: a user id, or an organization id.' }),
  q: Type.Optional(Type.String({ maxLength: limits.room_id_length_max, description: 'Case-insensitive substring of room_id.' })),
  page: Type.Optional(Type.Integer({ minimum: 0 })),
  page_size: Type.Optional(Type.Integer({ minimum: 0 })),
});

// ---- shaping (epoch-ms from the actor -> RFC 3339 on the wire) ----

function roomFields(room: RoomConfig) {
  return {
    room_id: room.room_id,
    admission_rate: room.admission_rate,
    anti_gaming: room.anti_gaming,
    auto_admit: room.auto_admit,
    capacity: room.capacity,
    created_at: isoTime(room.created_at)!,
    metadata: room.metadata,
    priority_groups: room.priority_groups.map((group) => ({ name: group.name, boost: group.boost, match_rules: group.match_rules })),
    queue_strategy: room.queue_strategy,
    session_ttl_seconds: room.session_ttl_seconds,
    status: room.status,
    updated_at: isoTime(room.updated_at)!,
  };
}

function roomShape(room: RoomConfig) {
  return { ...roomFields(room), created_by: room.created_by };
}

function summaryShape(summary: RoomSummary) {
  return { ...summary, created_at: isoTime(summary.created_at)!, updated_at: isoTime(summary.updated_at)! };
}

function positionShape(view: PositionView) {
  return { ...view, joined_at: isoTime(view.joined_at)!, expires_at: isoTime(view.expires_at) };
}

function admitShape(view: AdmitView) {
  return { ...view, admitted: view.admitted.map((item) => ({ ...item, admitted_at: isoTime(item.admitted_at)! })) };
}

function banShape(ban: BanView) {
  return { ...ban, banned_at: isoTime(ban.banned_at)!, banned_until: isoTime(ban.banned_until) };
}

function memberShape(member: MemberView) {
  return { ...member, joined_at: isoTime(member.joined_at)!, admitted_at: isoTime(member.admitted_at), expires_at: isoTime(member.expires_at) };
}

/** Parses `field:operator:value` items (the value may contain ':'). */
function parseFilters(items: string[] | undefined): RoomFilter[] {
  return parseListFilters(items, FILTER_FIELDS, FILTER_OPERATORS);
}

/** POSTs whose fields are all optional accept a missing body as {}. */
async function emptyBodyIsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

export function waitingRoomRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const base = '/api/v1/waiting-rooms';
  const tags = ['waiting-rooms'];
  const room = <Reply>(tenant: string, room_id: string, message: RoomMessage) =>
    services.actors.ask<Reply>(WAITING_ROOM_KIND, waitingRoomKey(tenant, room_id), message);

  app.get<{ Querystring: Static<typeof ListQuery> }>(base, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "List the tenant's rooms: q on room_id, sort_by created_at|updated_at|capacity, filter on status, queue_strategy, created_by, capacity.",
      security: bearerSecurity,
      querystring: ListQuery,
      response: { 200: Type.Object({ pagination: Pagination, rooms: Type.Array(RoomSummarySchema) }), ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const query = request.query;
    const page = Math.max(1, query.page ?? 1);
    const page_size = Math.min(100, query.page_size || 20);
    const filters = parseFilters(query.filter);
    const view = await services.actors.ask<RoomListView>(WAITING_ROOM_DIRECTORY_KIND, waitingRoomDirectoryKey(principal.tenant), {
      op: 'list',
      query: { q: query.q, sort_by: query.sort_by, sort_order: query.sort_order, filters, page, page_size },
    });
    return {
      pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total },
      rooms: view.rooms.map(summaryShape),
    };
  });

  app.get<{ Querystring: Static<typeof AdminListQuery> }>('/admin/waiting-rooms', {
    onRequest: authenticate,
    schema: {
      tags: [...tags, 'admin'],
      summary: "Admin: a tenant's rooms (newest first) with their statistics: waiting, active, admitted, admission rate.",
      security: bearerSecurity,
      querystring: AdminListQuery,
      response: { 200: Type.Object({ pagination: Pagination, rooms: Type.Array(RoomDetail) }), ...errorResponses(...bearerErrors, 403) },
    },
  }, async (request) => {
    requireAdmin(request);
    const { tenant, q } = request.query;
    const page = Math.max(1, request.query.page ?? 1);
    const page_size = Math.min(100, request.query.page_size || 20);
    const view = await services.actors.ask<RoomListView>(
      WAITING_ROOM_DIRECTORY_KIND,
      waitingRoomDirectoryKey(tenant),
      { op: 'list', query: { q, page, page_size } },
      { readOnly: true },
    );
    // A scatter-gather of reads: each room on the page answers its live statistics. A room
    // deleted since the directory answered is left out.
    const details = await Promise.all(
      view.rooms.map((summary) =>
        services.actors
          .ask<RoomDetailView>(WAITING_ROOM_KIND, waitingRoomKey(tenant, summary.room_id), { op: 'get' }, { readOnly: true })
          .catch((error: unknown) => {
            if (isServiceError(error) && error.code === 'not_found') return null;
            throw error;
          }),
      ),
    );
    return {
      pagination: { page, page_size, total: view.total, has_more: page * page_size < view.total },
      rooms: details.filter((detail) => detail !== null).map((detail) => ({ ...roomFields(detail.room), statistics: detail.statistics })),
    };
  });

  app.post<{ Body: Static<typeof CreateBody> }>(base, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Create a room. An existing room_id: 409 waiting_room_exists.',
      security: bearerSecurity,
      body: CreateBody,
      response: { 201: Room, ...errorResponses(...bearerErrors, 409) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    const { room_id, ...input } = request.body;
    const created = await room<RoomConfig>(principal.tenant, room_id, { op: 'create', room_id, input, by: principal.user_id });
    return reply.code(201).send(roomShape(created));
  });

  app.get<{ Params: Static<typeof MemberParams> }>(`${base}/global-bans/:member_id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "The rooms whose active global ban covers the member (empty: not globally banned).",
      security: bearerSecurity,
      params: MemberParams,
      response: { 200: Type.Array(Type.String()), ...errorResponses(...bearerErrors) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    return services.actors.ask<string[]>(WAITING_ROOM_DIRECTORY_KIND, waitingRoomDirectoryKey(principal.tenant), {
      op: 'global-bans',
      member_id: request.params.member_id,
    });
  });

  app.get<{ Params: RoomParamsT }>(`${base}/:room_id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Room detail with statistics.',
      security: bearerSecurity,
      params: RoomParams,
      response: { 200: RoomDetail, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await room<RoomDetailView>(principal.tenant, request.params.room_id, { op: 'get' });
    return { ...roomFields(view.room), statistics: view.statistics };
  });

  app.put<{ Params: RoomParamsT; Body: Static<typeof ReplaceBody> }>(`${base}/:room_id`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: {
      tags,
      summary: 'Change a room: every field given replaces the current one (admission_rate and anti_gaming field by field).',
      security: bearerSecurity,
      params: RoomParams,
      body: ReplaceBody,
      response: { 200: Room, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const updated = await room<RoomConfig>(principal.tenant, request.params.room_id, { op: 'replace', input: request.body });
    return roomShape(updated);
  });

  app.delete<{ Params: RoomParamsT }>(`${base}/:room_id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Delete a room with its members, bans and analytics; its global bans are lifted.',
      security: bearerSecurity,
      params: RoomParams,
      response: { 204: Type.Null(), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await room(principal.tenant, request.params.room_id, { op: 'delete' });
    return reply.code(204).send();
  });

  const admitRoute = (path: string, params: TSchema, summary: string) =>
    app.post<{ Params: { room_id: string; group_id?: string }; Body: Static<typeof AdmitBody> }>(path, {
      onRequest: authenticate,
      preValidation: emptyBodyIsObject,
      schema: {
        tags,
        summary,
        security: bearerSecurity,
        params,
        body: AdmitBody,
        response: { 200: AdmitReply, ...errorResponses(...bearerErrors, 404) },
      },
    }, async (request) => {
      const principal = requirePrincipal(request);
      const { count, member_ids } = request.body;
      const view = await room<AdmitView>(principal.tenant, request.params.room_id, { op: 'admit', count, member_ids, group: request.params.group_id });
      return admitShape(view);
    });
  admitRoute(`${base}/:room_id/admit`, RoomParams, 'Admit up to count waiting members (default batch_size) in line order within capacity, or the listed member_ids.');
  admitRoute(`${base}/:room_id/groups/:group_id/admit`, GroupParams, "Admit the group's waiting members in line order, within capacity.");

  app.get<{ Params: RoomParamsT; Querystring: Static<typeof AnalyticsQuery> }>(`${base}/:room_id/analytics`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Hourly admissions, rejections, abandonments and wait times, with a summary of the range.',
      security: bearerSecurity,
      params: RoomParams,
      querystring: AnalyticsQuery,
      response: { 200: AnalyticsReply, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { start_time, end_time, limit } = request.query;
    const view = await room<AnalyticsView>(principal.tenant, request.params.room_id, {
      op: 'analytics',
      start_ms: start_time === undefined ? undefined : start_time * 1000,
      end_ms: end_time === undefined ? undefined : end_time * 1000,
      limit,
    });
    return {
      hourly_stats: view.hourly_stats.map((row) => ({ ...row, hour: isoTime(row.hour)! })),
      room_id: view.room_id,
      summary: view.summary,
      time_range: { start: isoTime(view.start_ms)!, end: isoTime(view.end_ms)! },
    };
  });

  app.get<{ Params: RoomParamsT; Querystring: Static<typeof BansQuery> }>(`${base}/:room_id/bans`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Bans issued in this room (active only unless include_expired).',
      security: bearerSecurity,
      params: RoomParams,
      querystring: BansQuery,
      response: { 200: Type.Array(Ban), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const bans = await room<BanView[]>(principal.tenant, request.params.room_id, { op: 'list-bans', include_expired: request.query.include_expired });
    return bans.map(banShape);
  });

  app.post<{ Params: RoomParamsT; Body: Static<typeof BanBody> }>(`${base}/:room_id/bans`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Ban a member (replaces an earlier ban of the member); a waiting member is rejected, an active session ends.',
      security: bearerSecurity,
      params: RoomParams,
      body: BanBody,
      response: { 200: Ban, ...errorResponses(...bearerErrors, 404, 409) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { member_id, reason, duration_seconds, global } = request.body;
    const ban = await room<BanView>(principal.tenant, request.params.room_id, { op: 'ban', member_id, reason, duration_seconds, global, by: principal.user_id });
    return banShape(ban);
  });

  app.get<{ Params: Static<typeof BanParams> }>(`${base}/:room_id/bans/:member_id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "The member's ban in this room (also once expired, until purged), or null.",
      security: bearerSecurity,
      params: BanParams,
      response: { 200: Type.Union([Ban, Type.Null()]), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const ban = await room<BanView | null>(principal.tenant, request.params.room_id, { op: 'get-ban', member_id: request.params.member_id });
    return ban ? banShape(ban) : null;
  });

  app.delete<{ Params: Static<typeof BanParams> }>(`${base}/:room_id/bans/:member_id`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Lift a ban (a global one everywhere). Not banned here: 404.',
      security: bearerSecurity,
      params: BanParams,
      response: { 204: Type.Null(), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await room(principal.tenant, request.params.room_id, { op: 'unban', member_id: request.params.member_id });
    return reply.code(204).send();
  });

  app.get<{ Params: Static<typeof GroupParams>; Querystring: Static<typeof GroupStatusQuery> }>(`${base}/:room_id/groups/:group_id/status`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "A priority group's counts, average position and first members (waiting in line order, then active).",
      security: bearerSecurity,
      params: GroupParams,
      querystring: GroupStatusQuery,
      response: { 200: GroupStatusReply, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await room<GroupStatusView>(principal.tenant, request.params.room_id, {
      op: 'group-status',
      group_id: request.params.group_id,
      limit: request.query.limit,
    });
    return { ...view, members: view.members.map((member) => ({ ...member, joined_at: isoTime(member.joined_at)! })) };
  });

  app.post<{ Params: RoomParamsT; Body: Static<typeof JoinBody> }>(`${base}/:room_id/join`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: {
      tags,
      summary: "Join the line (member_id defaults to the caller's user id). Joining again returns the current entry.",
      security: bearerSecurity,
      params: RoomParams,
      body: JoinBody,
      response: { 200: JoinReply, ...errorResponses(...bearerErrors, 403, 404, 409) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { member_id = principal.user_id, priority_group, metadata } = request.body;
    const view = await room<PositionView>(principal.tenant, request.params.room_id, { op: 'join', member_id, priority_group, metadata });
    return {
      estimated_wait_seconds: view.estimated_wait_seconds,
      joined_at: isoTime(view.joined_at)!,
      member_id: view.member_id,
      position: view.position,
      priority_group: view.priority_group,
      room_id: view.room_id,
      status: view.status,
    };
  });

  app.post<{ Params: RoomParamsT; Body: Static<typeof MemberBody> }>(`${base}/:room_id/leave`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: {
      tags,
      summary: 'Leave the line or end the active session. Not a member: 404.',
      security: bearerSecurity,
      params: RoomParams,
      body: MemberBody,
      response: { 204: Type.Null(), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await room(principal.tenant, request.params.room_id, { op: 'leave', member_id: request.body.member_id ?? principal.user_id });
    return reply.code(204).send();
  });

  app.get<{ Params: RoomParamsT; Querystring: Static<typeof MembersQuery> }>(`${base}/:room_id/members`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Members: waiting ones in line order, then active ones in admission order.',
      security: bearerSecurity,
      params: RoomParams,
      querystring: MembersQuery,
      response: { 200: MembersReply, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const { status, limit, offset } = request.query;
    const view = await room<MembersView>(principal.tenant, request.params.room_id, { op: 'members', status, limit, offset });
    return { ...view, members: view.members.map(memberShape) };
  });

  app.get<{ Params: RoomParamsT; Querystring: Static<typeof PositionQuery> }>(`${base}/:room_id/position`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: "A member's place in line (member_id defaults to the caller's user id).",
      security: bearerSecurity,
      params: RoomParams,
      querystring: PositionQuery,
      response: { 200: PositionReply, ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await room<PositionView>(principal.tenant, request.params.room_id, { op: 'position', member_id: request.query.member_id ?? principal.user_id });
    return positionShape(view);
  });

  app.post<{ Params: RoomParamsT; Body: Static<typeof MemberBody> }>(`${base}/:room_id/refresh`, {
    onRequest: authenticate,
    preValidation: emptyBodyIsObject,
    schema: {
      tags,
      summary: 'Extend an active session to now + session_ttl_seconds. Still waiting: 409; no active session: 404.',
      security: bearerSecurity,
      params: RoomParams,
      body: MemberBody,
      response: { 200: RefreshReply, ...errorResponses(...bearerErrors, 404, 409) },
    },
  }, async (request) => {
    const principal = requirePrincipal(request);
    const view = await room<{ new_expiry: number }>(principal.tenant, request.params.room_id, { op: 'refresh', member_id: request.body.member_id ?? principal.user_id });
    return { new_expiry: Math.floor(view.new_expiry / 1000), success: true };
  });

  app.post<{ Params: RoomParamsT; Body: Static<typeof RejectBody> }>(`${base}/:room_id/reject`, {
    onRequest: authenticate,
    schema: {
      tags,
      summary: 'Reject waiting members (others are ignored); each may rejoin after the cooldown.',
      security: bearerSecurity,
      params: RoomParams,
      body: RejectBody,
      response: { 204: Type.Null(), ...errorResponses(...bearerErrors, 404) },
    },
  }, async (request, reply) => {
    const principal = requirePrincipal(request);
    await room(principal.tenant, request.params.room_id, { op: 'reject', member_ids: request.body.member_ids, reason: request.body.reason });
    return reply.code(204).send();
  });
}
