import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../http/config.js';

const cluster = (env: Record<string, string>) => loadConfig({ ETCD_ENDPOINTS: '127.0.0.1:2379', PORT: '8081', ...env }).cluster;

describe('cluster config: MIN_IN_SYNC_REPLICAS', () => {
  it('defaults to 1 (a write rests on the copies in sync, possibly the leader alone)', () => {
    expect(cluster({})?.minInSyncReplicas).toBe(1);
  });

  it('accepts 1..REPLICATION_FACTOR', () => {
    expect(cluster({ REPLICATION_FACTOR: '3', MIN_IN_SYNC_REPLICAS: '2' })).toMatchObject({ replicationFactor: 3, minInSyncReplicas: 2 });
    expect(cluster({ REPLICATION_FACTOR: '3', MIN_IN_SYNC_REPLICAS: '3' })?.minInSyncReplicas).toBe(3);
  });

  it('refuses to start outside 1..REPLICATION_FACTOR, saying why', () => {
    expect(() => cluster({ REPLICATION_FACTOR: '2', MIN_IN_SYNC_REPLICAS: '3' })).toThrow('MIN_IN_SYNC_REPLICAS must be an integer from 1 to 2, got "3"');
    expect(() => cluster({ MIN_IN_SYNC_REPLICAS: '0' })).toThrow(/MIN_IN_SYNC_REPLICAS must be an integer from 1 to 2/);
    expect(() => cluster({ MIN_IN_SYNC_REPLICAS: 'two' })).toThrow(/MIN_IN_SYNC_REPLICAS/);
  });
});

describe('cluster config: REPLICATION_COMMIT_DELAY_MS', () => {
  it('defaults to 4 ms; 0 turns the wait off', () => {
    expect(cluster({})?.commitDelayMs).toBe(4);
    expect(cluster({ REPLICATION_COMMIT_DELAY_MS: '0' })?.commitDelayMs).toBe(0);
    expect(cluster({ REPLICATION_COMMIT_DELAY_MS: '100' })?.commitDelayMs).toBe(100);
  });

  it('refuses to start outside 0..100, saying why', () => {
    expect(() => cluster({ REPLICATION_COMMIT_DELAY_MS: '101' })).toThrow('REPLICATION_COMMIT_DELAY_MS must be an integer from 0 to 100, got "101"');
    expect(() => cluster({ REPLICATION_COMMIT_DELAY_MS: '-1' })).toThrow(/REPLICATION_COMMIT_DELAY_MS/);
    expect(() => cluster({ REPLICATION_COMMIT_DELAY_MS: '2.5' })).toThrow(/REPLICATION_COMMIT_DELAY_MS/);
  });
});
