/**
 * What the edge needs from the actor system: send a message to kind + key.
 * The local runtime implements it; the cluster router implements it by
 * forwarding to the partition's leader. http/ depends on this, nothing more.
 */
export interface ActorClient {
  ask<Reply = unknown>(kind: string, key: string, message: unknown, options?: AskOptions): Promise<Reply>;
  tell(kind: string, key: string, message: unknown): void;
}

export interface AskOptions {
  /**
   * The message changes nothing (a read), or sending it twice is the same as
   * once. In a cluster it may then be sent
   * again when its first delivery's outcome is unknown (the leader changed or
   * its connection broke while it was pending): a write could not be.
   */
  readOnly?: boolean;
  /**
   * Cluster: how long to wait for the partition's leader (failover, handoff)
   * before 503 partition_unavailable, instead of FORWARD_DEADLINE_MS. For a
   * caller with a fallback (the session check's last positive answer).
   */
  deadlineMs?: number;
}
