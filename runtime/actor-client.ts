/**
 * What the edge needs from the actor system: send a message to kind + key.
 * The local runtime implements it; the cluster router implements it by
 * forwarding to the partition's leader. http/ depends on this, nothing more.
 */
export interface ActorClient {
  ask<Reply = unknown>(kind: string, key: string, message: unknown): Promise<Reply>;
  tell(kind: string, key: string, message: unknown): void;
}
