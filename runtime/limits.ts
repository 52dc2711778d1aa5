/**
 * Every queue and loop has an upper bound (TigerBeetle's "put a limit on
 * everything"). Names carry the unit last.
 */
export const limits = {
  /** Messages waiting for one actor before new ones are refused (503). */
  mailbox_messages_max: 10_000,
  /** Messages one actor runs before committing them together (group commit). */
  turn_batch_messages_max: 512,
  /** An actor with no message for this long is passivated (dropped from RAM). */
  passivate_idle_ms: 60_000,
  /** How often the passivation sweep runs. */
  passivate_sweep_interval_ms: 15_000,
  /**
   * Actors held in memory (Akka Cluster Sharding's active-entity-limit). Past
   * it, quiet actors are passivated before their idle time is up, the
   * longest-resident first, down to nine tenths of it: a stream of new keys
   * (fresh lock keys, one-off subjects) costs bounded RAM instead of
   * passivate_idle_ms worth of actors.
   */
  activations_max: 100_000,
  /**
   * Of those, actors that have had one message only (probation.ts: the
   * probationary segment of a segmented LRU). Past it, the oldest of them
   * leave memory first, once idle for activations_probation_idle_ms, down to
   * nine tenths of it; an actor asked again while in memory is no longer
   * counted. Small and quick, so that under a stream of one-off keys they
   * die young: they must leave before the next scavenge of V8's young
   * generation, which comes every 50-60 ms on one node taking 20,000 new keys
   * a second. 500 of them are 25 ms at that rate (and 5 s at 100 a second).
   * With 2,000 kept for 100 ms, a scavenge copied 1.2 MB and promoted
   * 0.9 MB (mostly these actors); with 500 and 10 ms, it copied 0.66 MB and
   * promoted 0.06 MB, and the scavenges took half the time
   * (docs/performance.md, "Actors asked once leave before the next
   * scavenge").
   */
  activations_probation_max: 500,
  /** An actor asked once that ran its turn this recently is kept over activations_probation_max (its next message may be on the way). */
  activations_probation_idle_ms: 10,
  /** An actor that ran a turn this recently is kept over activations_max (a hot actor is not reloaded on every message). */
  activations_evict_idle_ms: 1_000,
  /**
   * Only alarms due within this window are held in memory; later ones stay in
   * LMDB (time-ordered) until the window reaches them, so a passivated actor's
   * far-off alarm costs no RAM. The window moves every quarter of its length.
   */
  alarm_window_ms: 5 * 60_000,
  /** Outbox deliveries refused by a full mailbox are retried after this long. */
  outbox_retry_delay_ms: 250,
  /** Receiver-side de-duplication records are kept this long. */
  dedup_retention_ms: 24 * 3600_000,
  /** Expired de-duplication records dropped per sweep (every passivate_sweep_interval_ms): 50k per 15 s. */
  dedup_sweep_records_max: 50_000,
  /**
   * A deferred ask (a turn returned `defer: true`) not answered within this
   * long is rejected with flow_interrupted; measured on the runtime's clock.
   */
  deferred_reply_ms_max: 10_000,
  /** Deferred asks one activation may hold; past it a deferring ask is refused with actor_overloaded. */
  deferred_replies_per_actor_max: 10_000,
  /** Default number of partitions on a node that is not in a cluster. */
  partitions_default: 64,
} as const;

export type Limits = { -readonly [K in keyof typeof limits]: number };
