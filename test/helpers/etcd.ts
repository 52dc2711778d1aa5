import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnEtcd } from '../../cluster/etcd-process.js';

export interface TestEtcd {
  /** Client URL for ETCD_ENDPOINTS / the etcd3 client. */
  endpoints: string;
  dataDir: string;
  /** etcd's own output (errors only), for failure messages. */
  output(): string;
  /** SIGKILLs etcd, waits for its exit, removes its data directory. Idempotent. */
  stop(): Promise<void>;
  /** SIGKILLs etcd and waits for its exit, keeping its data directory (an outage; restart() ends it). */
  kill(): Promise<void>;
  /** Starts etcd again on the same data directory and ports; resolves once it reports healthy. */
  restart(): Promise<void>;
}

/**
 * A private etcd for one test file: free loopback ports, a temporary data
 * directory. Throws (the test fails, it is not skipped) when etcd is not
 * installed, with the command that installs it.
 */
/**
 * etcd fsyncs its WAL on every write; on a busy 2-core test machine a slow
 * disk stalls lease renewals for longer than a 2 s TTL. Tests run etcd in
 * memory (/dev/shm) where it exists: its durability is not under test.
 */
function etcdParentDir(): string {
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

export async function startEtcd(): Promise<TestEtcd> {
  const dataDir = mkdtempSync(join(etcdParentDir(), 'etcd-test-'));
  let etcd;
  try {
    etcd = await spawnEtcd({ dataDir, name: 'test' });
  } catch (error) {
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  let current = etcd;
  let history = '';
  const { clientPort, peerPort } = etcd;
  return {
    endpoints: current.endpoints,
    dataDir,
    output: () => history + current.output(),
    async stop() {
      await current.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
    async kill() {
      await current.stop();
    },
    async restart() {
      history += current.output();
      current = await spawnEtcd({ dataDir, name: 'test', clientPort, peerPort });
    },
  };
}
