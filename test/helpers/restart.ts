import { rmSync } from 'node:fs';
import { afterAll, expect } from 'vitest';
import type { TestNode, TestResponse } from './node.js';

/**
 * The nodes a restart test starts, one after another, on one data directory:
 * push each as it starts; after the file every one is stopped and the
 * directory (the first node's) removed.
 */
export function restartedNodes(): TestNode[] {
  const nodes: TestNode[] = [];
  afterAll(async () => {
    for (const node of nodes) await node.stop().catch(() => undefined);
    if (nodes[0]) rmSync(nodes[0].dataDir, { recursive: true, force: true });
  });
  return nodes;
}

/** The body of an answer that must have `status` (its text in the failure message). */
export function ok(res: TestResponse, status = 200) {
  expect(res.status, res.text).toBe(status);
  return res.body;
}
