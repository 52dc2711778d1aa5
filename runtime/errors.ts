/**
 * The one registry of error codes (as in fastify's lib/errors.js). Each code
 * has an HTTP status and a description; docs/errors.md lists the same codes
 * and test/unit/error-registry.test.ts keeps the two in step.
 *
 * Actors throw ServiceError for expected operating errors (a held lock, a
 * duplicate e-mail); the edge turns it into the conventions' error body.
 */
export const errorCodes = {
  // 400
  BAD_REQUEST: { status: 400, description: 'The request is malformed or fails validation; `details` names the failing fields.' },
  invalid_two_factor_code: { status: 400, description: 'The two-factor code (TOTP or backup code) is not valid, or was already used.' },
  invalid_verification_token: { status: 400, description: 'The e-mail verification token is unknown, expired, already used, or was sent to an address the account no longer has.' },
  invalid_reset_token: { status: 400, description: 'The password reset token is unknown, expired, already used, replaced by a newer one, or was sent to an address the account no longer has.' },
  invalid_configuration: { status: 400, description: 'The resource is not in a state that allows this operation (a webhook that is inactive cannot be tested or redriven; enable it first).' },
  invalid_toml: { status: 400, description: 'An agent payload is not a valid TOML document; the message and `details` name the field, line and column (docs/api/agents.md).' },
  invalid_signature: { status: 400, description: "A vault witness signature does not verify: not the named signer's Ed25519 signature of the attestation's witness message (docs/api/vault.md)." },
  invalid_json_schema: { status: 400, description: "A form's schema is not a JSON Schema that ajv compiles (strict mode: unknown keywords and unresolvable $ref are refused), or does not describe an object (docs/api/forms.md)." },
  submission_invalid: { status: 400, description: "A form submission does not satisfy the form's current schema version or its conditional logic; `details.errors` lists every problem (docs/api/forms.md)." },
  spam_suspected: { status: 400, description: 'An anonymous form submission was refused as automated: a honeypot field was filled, or it came sooner than the form\'s min_submit_ms after started_at; `details.reason` says which (docs/api/forms.md).' },
  file_rejected: { status: 400, description: 'A file of a multipart form submission was refused: its sniffed content type is not allowed, its declared type differs from its content, or there are more files than max_files; `details.reason` says which (docs/api/forms.md, "Multipart"). Nothing is stored.' },
  link_failed: { status: 400, description: 'Linking an external account failed at the provider: the code was refused, or the provider was unreachable, slow or answered badly.' },
  // 400, OAuth 2.0 token endpoint (RFC 6749 §5.2): rendered as {error: wire, error_description}
  oauth_invalid_request: { status: 400, wire: 'invalid_request', description: 'The token request is missing a parameter, repeats one, uses two client authentication methods, or is not form-encoded.' },
  oauth_invalid_grant: { status: 400, wire: 'invalid_grant', description: 'The authorization code or refresh token is invalid, expired, replayed, issued to another client, or its PKCE verifier or redirect_uri does not match; or the user can no longer sign in.' },
  oauth_unauthorized_client: { status: 400, wire: 'unauthorized_client', description: 'The client is not registered for this grant type (or is public and asks for client_credentials).' },
  oauth_unsupported_grant_type: { status: 400, wire: 'unsupported_grant_type', description: 'The grant_type is not one this server supports.' },
  oauth_invalid_scope: { status: 400, wire: 'invalid_scope', description: 'The requested scope exceeds what the client registered or what the grant originally carried.' },
  // 400, SCIM 2.0 (RFC 7644 §3.12): rendered as {schemas, status, scimType: wire, detail}
  scim_invalid_value: { status: 400, wire: 'invalidValue', description: 'A SCIM attribute has a wrong type or value, or a required one is missing.' },
  scim_invalid_syntax: { status: 400, wire: 'invalidSyntax', description: 'The SCIM request body is not valid JSON or not the expected structure (a PatchOp without Operations, ...).' },
  scim_invalid_filter: { status: 400, wire: 'invalidFilter', description: 'The SCIM filter cannot be parsed or uses an attribute or operator this server does not filter on.' },
  scim_invalid_path: { status: 400, wire: 'invalidPath', description: 'A SCIM PATCH path names an attribute this server does not know.' },
  scim_mutability: { status: 400, wire: 'mutability', description: 'The SCIM request changes an attribute this server does not let change (userName, reactivation, remove, ...).' },
  // 401
  unauthorized: { status: 401, description: 'Missing, malformed, expired or revoked credential.' },
  invalid_credentials: { status: 401, description: 'Login failed. The same message for an unknown user and a wrong password.' },
  oauth_invalid_client: { status: 401, wire: 'invalid_client', description: 'OAuth client authentication failed (unknown client, wrong secret, or a method other than the registered one); sent with WWW-Authenticate: Basic.' },
  invalid_refresh_token: { status: 401, description: 'The refresh token is unknown, already rotated, or its session ended.' },
  // 402
  payment_required: { status: 402, description: 'The route is priced (x402) and the caller has not paid: the body also carries the x402 fields x402Version, error and accepts (the payment requirements); see docs/api/x402.md.' },
  // 403
  forbidden: { status: 403, description: 'Authenticated, but not allowed to do this.' },
  insufficient_scope: { status: 403, description: 'The API key or OAuth access token lacks the scope this endpoint needs, or the endpoint does not accept that credential; see docs/api/api-keys.md and docs/api/oauth.md.' },
  sso_required: { status: 403, description: "Password login is disabled for this user: an organization they belong to enforces single sign-on (the message names it); sign in through the organization's identity provider." },
  impersonation_forbidden: { status: 403, description: 'An impersonation session cannot create or change credentials (API keys, two-factor, OAuth or CLI approvals, linked accounts, SCIM tokens, ...); the user must do it in their own session. See docs/api/admin.md.' },
  waiting_room_member_banned: { status: 403, description: 'The member is banned from this waiting room (a room ban or a global ban of the tenant).' },
  // 404
  not_found: { status: 404, description: 'No such resource (also for a resource of another tenant).' },
  invitation_not_found: { status: 404, description: 'No such pending organization invitation for the caller (unknown, revoked, used, or addressed to another e-mail).' },
  dlq_entry_not_found: { status: 404, description: "No dead-letter entry with this event id in the webhook's dead-letter queue." },
  presence_session_not_found: { status: 404, description: 'No live presence session with this session_id in the context (it left or expired).' },
  mq_queue_not_found: { status: 404, description: 'No message queue with this name for the caller (also a queue of another tenant).' },
  mq_topic_not_found: { status: 404, description: 'No message topic with this name for the caller (also a topic of another tenant).' },
  mq_subscription_not_found: { status: 404, description: 'The queue is not subscribed to this topic.' },
  mq_receipt_handle_invalid: { status: 404, description: "The receipt handle names no message this queue still holds under that handle: unknown, already deleted, expired, moved to the dead-letter queue, or received again since (only the latest receive's handle works). See docs/api/mq.md." },
  // 409
  last_owner: { status: 409, description: 'The last owner of an organization cannot leave, be removed or be demoted; make someone else an owner first.' },
  invitation_expired: { status: 409, description: 'The organization invitation has expired; ask for a new one.' },
  org_slug_taken: { status: 409, description: 'Another organization already uses this slug.' },
  domain_taken: { status: 409, description: 'Another organization has verified this domain; a domain belongs to one organization at a time.' },
  domain_not_verified: { status: 409, description: "The domain's DNS TXT verification record was not found with the expected value; details name the record expected." },
  conflict: { status: 409, description: 'The request conflicts with the current state of the resource.' },
  email_taken: { status: 409, description: 'A user with this e-mail address already exists.' },
  username_taken: { status: 409, description: 'A user with this username already exists.' },
  lock_held: { status: 409, description: 'The lock is held by another owner.' },
  lock_not_held: { status: 409, description: 'The lock_id/owner_id pair is not the current holder of the lock.' },
  idempotency_in_progress: { status: 409, description: 'A request with the same Idempotency-Key is still being processed.' },
  idempotency_key_reused: { status: 409, description: 'The Idempotency-Key was used before with a different method, path or body.' },
  idempotency_replay_withheld: { status: 409, description: 'The request with this Idempotency-Key already ran; its answer carried a secret shown once, so it is not replayed.' },
  waiting_room_exists: { status: 409, description: 'A waiting room with this room_id already exists.' },
  waiting_room_member_not_active: { status: 409, description: 'The member is still waiting; only an admitted (active) session can be refreshed.' },
  waiting_room_limit_reached: { status: 409, description: 'A per-room limit is reached (waiting members or bans); see docs/api/waiting-rooms.md.' },
  api_key_limit_reached: { status: 409, description: 'The user already holds the maximum number of API keys; delete one first.' },
  account_already_linked: { status: 409, description: 'The external account is linked to another user, or this user already has an account of that provider linked.' },
  agent_key_taken: { status: 409, description: 'Another agent of the tenant (or organization) already has this key.' },
  agent_limit_reached: { status: 409, description: 'The tenant already has the maximum number of agents (docs/api/agents.md); delete one first.' },
  agent_change_in_progress: { status: 409, description: 'Another change to this agent is being applied at this moment; retry.' },
  attestation_locked: { status: 409, description: "The attestation's lock condition does not hold yet; `details` carry the progress (time, signatures, lottery)." },
  lottery_closed: { status: 409, description: "The attestation's lottery has been won or has sold all of its entries; it takes no more." },
  webhook_limit_reached: { status: 409, description: 'The tenant already has the maximum number of webhooks (docs/api/webhooks.md); delete one first.' },
  presence_context_exists: { status: 409, description: 'A presence context with this id already exists.' },
  scim_uniqueness: { status: 409, wire: 'uniqueness', description: 'The SCIM userName is already in use in the directory, or a platform account already has the e-mail.' },
  x402_rule_limit_reached: { status: 409, description: 'The platform already holds the maximum number of x402 price rules (docs/api/x402.md); delete one first.' },
  x402_balance_limit_reached: { status: 409, description: 'The top-up would take the x402 balance above its maximum (1,000,000,000 USD).' },
  presence_capacity_full: { status: 409, description: "The presence context is at capacity and its overflow_policy is reject; details carry admission 'rejected' and the occupancy." },
  // talent (docs/api/talent.md)
  talent_curve_invalid: { status: 400, description: 'The XP curve cannot be computed (missing or out-of-range params for its kind, a short table, a bonus level outside 2..max_level); details list every problem.' },
  talent_definition_invalid: { status: 400, description: "The talent tree definition has issues (cycles, unknown references, unreachable nodes, impossible gates); details.issues lists every one, as validate does." },
  talent_curve_not_found: { status: 404, description: 'No XP curve with this curve_id in the tenant.' },
  talent_tree_not_found: { status: 404, description: 'No talent tree with this tree_id in the tenant (or every version of it was deleted).' },
  talent_version_not_found: { status: 404, description: 'The talent tree has no stored version with this number.' },
  talent_node_not_found: { status: 404, description: 'The talent tree version has no node with this id.' },
  talent_curve_exists: { status: 409, description: 'An XP curve with this curve_id already exists (curves are immutable: create one with a new id).' },
  talent_tree_exists: { status: 409, description: 'A talent tree with this tree_id already exists; PUT creates a new version of it.' },
  talent_tree_limit: { status: 409, description: 'The tenant already has the maximum number of talent trees (docs/api/talent.md); delete one first.' },
  talent_version_limit: { status: 409, description: 'The talent tree already stores the maximum number of versions (docs/api/talent.md); delete an old version first.' },
  talent_max_rank: { status: 409, description: 'Allocation refused, rule max_rank: the node is at its max_rank.' },
  talent_tier_locked: { status: 409, description: "Allocation refused, rule tier_gate: the points spent in lower tiers do not reach the node's tier gate." },
  talent_prerequisites_unmet: { status: 409, description: 'Allocation refused, rule prerequisites: a prerequisite node lacks the rank required; details.missing lists them.' },
  talent_exclusive_group: { status: 409, description: "Allocation refused, rule exclusive_group: the node's exclusive group already has max_selected other nodes selected; details.excluded_by names them." },
  talent_insufficient_points: { status: 409, description: 'Allocation or respec refused, rule affordable (or respec_cost): the wallet balances cannot pay the cost.' },
  talent_respec_disabled: { status: 409, description: 'The tree does not allow this kind of respec (full or partial).' },
  talent_respec_invalid: { status: 409, description: 'The partial respec would leave an allocated node without its prerequisites or tier gate; details name the node and the rule.' },
  breeding_incompatible: { status: 409, description: "The parents may not breed under the species' compatibility rules (self-compatibility, required flags, minimum generation, or a parent of another species); `details.rule` names the rule. See docs/api/lineage.md." },
  breeding_limit_reached: { status: 409, description: "A parent has bred the species' max_lifetime_breedings times; `details` name the entity and its count." },
  inbreeding_limit_exceeded: { status: 409, description: "The offspring's inbreeding coefficient (Wright's, from the pedigree) would exceed the species' max_coefficient; `details` carry both values." },
  trait_in_use: { status: 409, description: "The trait is used by a species (or named in another trait's conflicts_with): it cannot be deleted, nor its kind or alleles changed." },
  form_not_accepting: { status: 409, description: "The form is not active (draft, paused, deprecated or disabled): it takes no submissions or drafts; `details.status` names its status (docs/api/forms.md)." },
  invalid_status_transition: { status: 409, description: "The form's status state machine does not allow this move; `details` name from and to (docs/api/forms.md, \"Status\")." },
  form_limit_reached: { status: 409, description: 'A forms bound is reached (schema versions, submissions or drafts per form); see docs/api/forms.md.' },
  lineage_limit_reached: { status: 409, description: "A lineage bound is reached (traits or species per tenant, versions per species); see docs/api/lineage.md." },
  mq_queue_exists: { status: 409, description: 'A message queue with this name already exists with other settings (creating it again with the same settings returns it).' },
  mq_topic_exists: { status: 409, description: 'A message topic with this name already exists with other settings (creating it again with the same settings returns it).' },
  mq_subscription_exists: { status: 409, description: 'The queue is already subscribed to this topic with another filter policy or raw delivery setting; delete that subscription first.' },
  mq_message_not_in_flight: { status: 409, description: 'The message is not in flight (its visibility timeout has passed), so its visibility cannot be changed; receive it again.' },
  mq_queue_full: { status: 409, description: 'The queue holds its maximum of messages or bytes (docs/api/mq.md); receive and delete some first.' },
  mq_limit_reached: { status: 409, description: 'A per-topic limit is reached (subscriptions); see docs/api/mq.md.' },
  rate_limit_tier_exists: { status: 409, description: 'A rate-limit tier with this endpoint path, module or name already exists; change it with PUT.' },
  rate_limit_user_exists: { status: 409, description: 'The user already has rate-limit settings; change them with PUT /admin/rate-limits/users/{user_id}.' },
  rate_limit_tier_in_use: { status: 409, description: 'User settings still name this support tier; move them to another tier before deleting it.' },
  rate_limit_rules_full: { status: 409, description: 'The rate-limit rule set holds the maximum number of tiers or user settings of this kind (docs/api/rate-limits.md).' },
  job_queue_exists: { status: 409, description: 'A job queue with this name already exists in the tenant (perhaps created by scheduling into it); change it with PATCH.' },
  job_queue_not_empty: { status: 409, description: 'The job queue still has scheduled or processing jobs; cancel them, or delete with force=true.' },
  job_queue_full: { status: 409, description: 'The job queue holds the maximum number of jobs (docs/api/jobs.md); wait for cleanup or use another queue.' },
  job_not_cancellable: { status: 409, description: 'The job is being delivered (processing); only a scheduled job (also one waiting between retries) can be cancelled.' },
  insufficient_funds: { status: 409, description: "The ledger account's available funds (balance minus open holds) in that currency do not cover the hold; `details` carry requested and available (docs/api/ledger.md)." },
  hold_closed: { status: 409, description: 'The ledger hold was already captured or released (or released before it was placed); it cannot change again.' },
  ledger_reference_conflict: { status: 409, description: 'An admin credit with this reference was already applied to the account with another amount or currency.' },
  ledger_limit_reached: { status: 409, description: 'A ledger bound is reached: open holds per account, or a balance past 2^53 - 1 minor units (docs/api/ledger.md).' },
  auction_not_open: { status: 409, description: 'The auction takes no bids: it is scheduled (not yet open), or has ended, been settled or cancelled; or only an open auction can be closed.' },
  bid_too_low: { status: 409, description: 'The bid is below the minimum (starting price, or current price plus the increment), or a proxy maximum not above your current one; `details` carry the minimum.' },
  already_high_bidder: { status: 409, description: 'The caller is already the high bidder; raise the maximum with a proxy bid instead of bidding again.' },
  auction_item_conflict: { status: 409, description: 'An item is already in a live auction of the tenant (or twice in one batch); `details` name each; nothing was created.' },
  auction_limit_reached: { status: 409, description: 'The tenant already has the maximum number of live auctions (docs/api/auctions.md); nothing was created.' },
  auction_invalid_transition: { status: 409, description: "The auction's state machine does not allow this status change; `details` carry from, to and the allowed moves (docs/api/auctions.md)." },
  auction_settling: { status: 409, description: 'The auction is being settled; it cannot be deleted until the settlement completes.' },
  auction_bid_limit_reached: { status: 409, description: 'The auction has taken the maximum number of bids (docs/api/auctions.md).' },
  // 408
  request_timeout: { status: 408, description: 'The request (headers and body) did not arrive within HTTP_REQUEST_TIMEOUT_MS, or its headers within HTTP_HEADERS_TIMEOUT_MS; the connection is closed.' },
  // 426
  upgrade_required: { status: 426, description: 'The endpoint is a WebSocket (GET .../ecs/{index}/coordinator/ws): send the request as a WebSocket upgrade.' },
  // 413, 415, 431
  payload_too_large: { status: 413, description: 'The request body is larger than the limit.' },
  headers_too_large: { status: 431, description: "The request's header block is larger than Node's limit (16 KiB), for example an oversized Authorization header; the connection is closed." },
  unsupported_media_type: { status: 415, description: 'The request body has a content type the endpoint does not accept.' },
  // 429
  rate_limited: { status: 429, description: 'Too many requests; retry after the Retry-After header.' },
  waiting_room_rejoin_cooldown: { status: 429, description: 'The member left or was rejected recently and may not rejoin yet; retry after the Retry-After header.' },
  // 5xx
  internal_error: { status: 500, description: 'A defect in the service. Never used for bad input.' },
  actor_overloaded: { status: 503, description: "The resource's mailbox is full; retry after the Retry-After header." },
  server_busy: { status: 503, description: 'The node is at its limit of concurrent password hashing (login, registration); retry after the Retry-After header.' },
  vault_unavailable: { status: 503, description: 'This node has no vault seal key (a cluster node needs VAULT_SEAL_KEY, the same on every node); attestations cannot be created or revealed here.' },
  shutting_down: { status: 503, description: 'The node is shutting down; retry on another node or later.' },
  not_leader: { status: 503, description: 'Cluster-internal: the node does not lead the partition; the edge retries at the leader. Reaches a client only through the operator API.' },
  partition_unavailable: { status: 503, description: 'No node could serve the partition in time (failover or handoff in progress, or no in-sync replica alive); retry after Retry-After.' },
  not_enough_replicas: {
    status: 503,
    description: 'The write was refused, nothing written: its partition has fewer in-sync copies than MIN_IN_SYNC_REPLICAS (a replica died or fell behind); retry after Retry-After. Reads still work.',
  },
  oauth_server_error: { status: 500, wire: 'server_error', description: 'The OAuth token endpoint failed by a defect (RFC 6749 §5.2 rendering of internal_error).' },
  oauth_temporarily_unavailable: { status: 503, wire: 'temporarily_unavailable', description: 'The OAuth token endpoint cannot answer now (a 429 or 503 underneath keeps its status and Retry-After).' },
  x402_facilitator_unavailable: { status: 503, description: 'The x402 facilitator (X402_FACILITATOR_URL) did not answer, timed out or answered badly while verifying or settling a payment; nothing was charged; retry after Retry-After.' },
  attachment_unavailable: { status: 503, description: "The cluster node whose disk holds a submission's file is not reachable now; retry after Retry-After." },
  flow_interrupted: { status: 503, description: 'A multi-step operation was interrupted before it answered (node restart or failover); its outcome is durable: retry with the same Idempotency-Key or read the resource.' },
  // throttle plans (docs/api/throttle.md)
  throttle_subject_invalid: { status: 400, description: 'The throttle subject is not an internal id: it looks like an e-mail address or a phone number (personal data is refused), has characters other than letters, digits and `_ . : -`, or lacks a namespace the plan requires; see docs/api/throttle.md.' },
  throttle_cost_exceeds_limit: { status: 400, description: "The check's cost is larger than the plan's max_requests, so it could never pass." },
  throttle_consume_token_invalid: { status: 400, description: 'The consume_token is malformed, or was not issued by a check of this plan and subject.' },
  throttle_plan_exists: { status: 409, description: 'A throttle plan with this plan_id already exists in the tenant.' },
  throttle_plan_limit_reached: { status: 409, description: 'The tenant already has the maximum number of throttle plans (docs/api/throttle.md); delete one first.' },
  throttle_refund_limit_reached: { status: 409, description: 'The subject has had the maximum number of refunds still within their refund window (docs/api/throttle.md); retry when older ones pass their window.' },
  throttle_limit_exceeded: { status: 429, description: "A throttle check was denied under hard enforcement; retry after the Retry-After header. `details` carries the check's result (allowed false, consume_token, remaining, ...)." },
  // rituals (docs/api/rituals.md)
  ritual_not_assignee: { status: 403, description: 'The part is assigned to another user: only its assignee may check in or perform for it; nothing changed (docs/api/rituals.md).' },
  ritual_part_not_found: { status: 404, description: 'The ritual (in the version the attempt armed) has no part with this part_id.' },
  ritual_attempt_closed: { status: 409, description: 'The ritual attempt has ended (completed, or failed and past its deadline); `details` carry its status and report.' },
  ritual_attempt_state: { status: 409, description: 'The ritual attempt is not in a state that allows this (a countdown starts only from armed); `details.status` names its state.' },
  ritual_part_already_performed: { status: 409, description: 'The part has already performed in this ritual attempt (each part performs once).' },
  ritual_out_of_order: { status: 409, description: "The performance would break the ritual's ordering (mode forward or reverse): a part that comes after it has already performed; nothing changed." },
  ritual_window_not_open: { status: 409, description: "The countdown's window has not opened yet: a performance before window_open_ms does not count and is refused; nothing changed." },
  ritual_limit_reached: { status: 409, description: 'The tenant already has the maximum number of ritual definitions (docs/api/rituals.md).' },
  // items (docs/api/items.md)
  items_definition_not_found: { status: 404, description: 'No item definition with this id in the domain (in the path, or named by a request field: `details` names it).' },
  items_blueprint_not_found: { status: 404, description: 'No blueprint with this id in the domain.' },
  items_collection_not_found: { status: 404, description: 'No collection with this id in the domain.' },
  items_container_not_found: { status: 404, description: 'No container with this id in the domain (in the path, or named by a request field: `details` names it).' },
  items_item_not_found: { status: 404, description: 'No item with this id in the container.' },
  items_definition_exists: { status: 409, description: 'A definition with this definition_id already exists in the domain (or twice in one batch).' },
  items_container_exists: { status: 409, description: 'A container with this container_id already exists in the domain.' },
  items_definition_in_use: { status: 409, description: "The definition is named by a blueprint, a collection or another definition's salvage outputs (`details.used_by`); change or delete them first." },
  items_container_cycle: { status: 409, description: 'The container would be inside itself: its new parent is the container or one of its descendants.' },
  items_nesting_limit: { status: 409, description: 'The container tree would nest deeper than the limit (docs/api/items.md).' },
  items_capacity_exceeded: { status: 409, description: 'The container cannot take the whole quantity: not enough slots, weight or volume (`details.limit`); nothing was placed.' },
  items_insufficient_inputs: { status: 409, description: "The source container lacks a blueprint's inputs (`details.missing`); nothing was consumed." },
  items_merge_incompatible: { status: 409, description: 'The two items are not stacks of the same stackable definition with the same recorded max_stack, weight and volume (or are the same stack).' },
  items_stack_full: { status: 409, description: 'The target stack of a merge is already full.' },
  items_not_salvageable: { status: 409, description: 'The definition has no salvage outputs.' },
  items_domain_limit: { status: 409, description: 'The domain holds the maximum number of definitions, blueprints, collections or containers (docs/api/items.md).' },
  items_item_locked: { status: 409, description: 'The item has units locked by a trade or an auction (`details.locked_quantity`): it cannot be merged or salvaged, and only its free units can be crafted or locked, until the lock is released or transferred.' },
  items_lock_closed: { status: 409, description: 'The item lock or room was already released or transferred (a release that arrived first wins; `details.status`).' },
  // handshake (docs/api/handshake.md)
  handshake_invalid_state: { status: 409, description: 'The handshake session or its settlement is not in a status that allows this (ended, not negotiating, no settlement, rolled back, committing); `details.status` names it (docs/api/handshake.md).' },
  handshake_offer_open: { status: 409, description: "The caller's own offer is still open in the session: withdraw it or wait for an answer before offering again (`details.offer_id`)." },
  handshake_offer_not_open: { status: 409, description: 'The offer is no longer open (accepted, rejected, withdrawn, countered, expired or cancelled); `details.status` names it.' },
  handshake_max_rounds: { status: 409, description: 'The session has used all its policy.max_rounds rounds; no further offer can be made (`details` carry round and max_rounds).' },
  handshake_not_staged: { status: 409, description: 'The caller has not staged its side of the settlement: POST .../settlement/stage first, then confirm.' },
  handshake_stage_in_progress: { status: 409, description: "The caller's holds are still being placed by an earlier stage call; that call answers when they are." },
  handshake_counterparty_invalid: { status: 422, description: "The counterparty is not another user of the caller's tenant (an organization member for an org API key; a personal tenant has no other user), or is the caller." },
  // cluster operations (docs/cluster.md)
  no_drain_target: { status: 409, description: 'The node cannot be drained: no other serving node could take its partitions over (an embedded node, or the last serving member of a cluster). See docs/cluster.md.' },
} as const satisfies Record<string, ErrorCodeEntry>;

/**
 * A registry entry. `wire` is set on the codes of a standard's error format
 * (RFC 6749 OAuth `error`, RFC 7644 SCIM `scimType`): the value the edge
 * renders on routes that answer in that format (http/plugins/error-handler.ts).
 */
export interface ErrorCodeEntry {
  status: number;
  description: string;
  wire?: string;
}

export type ErrorCode = keyof typeof errorCodes;

export class ServiceError extends Error {
  override name = 'ServiceError';
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly details?: unknown;
  /** Seconds, sent as Retry-After on 429/503. */
  readonly retryAfterSeconds?: number;

  constructor(code: ErrorCode, message?: string, options: { details?: unknown; retryAfterSeconds?: number } = {}) {
    // An expected outcome (a held lock, a duplicate e-mail) needs no stack, and
    // capturing one costs more than the lock turn itself. Defects are other
    // Error classes and keep theirs.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message ?? errorCodes[code].description);
    Error.stackTraceLimit = stackTraceLimit;
    this.code = code;
    this.statusCode = errorCodes[code].status;
    this.details = options.details;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof ServiceError;
}
