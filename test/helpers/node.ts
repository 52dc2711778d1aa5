import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { expect } from 'vitest';
import { Agent, fetch } from 'undici';
import { ManualClock, type Clock } from '../../runtime/index.js';
import { loadConfig, type NodeConfig } from '../../http/config.js';
import { startNode, type RunningNode } from '../../http/node.js';
import type { DomainResolver } from '../../http/domain-resolver.js';
import { contractOf, type ResponseContract } from './response-contract.js';

/**
 * The one harness for HTTP tests: a real node (real LMDB in a temp dir, real
 * Fastify listening on a loopback port) driven with fetch over the socket.
 */
export interface TestNode {
  node: RunningNode;
  url: string;
  dataDir: string;
  clock: Clock;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Registers a fresh user and returns its access token and id. */
  newUser(prefix?: string): Promise<{ token: string; user_id: string; refresh_token: string; email: string; username: string; password: string }>;
  /** Signs in as the bootstrap administrator of `config` (adminEmail, adminPassword) and returns the access token. */
  loginAdmin(): Promise<string>;
  /** Stops the node gracefully (data dir kept: restart with restartTestNode). */
  stop(): Promise<void>;
  /** Stops the node and removes its data. */
  destroy(): Promise<void>;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Sent as-is instead of JSON.stringify(body). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

let userCounter = 0;

export function testConfig(dataDir: string, overrides: Partial<NodeConfig> = {}): NodeConfig {
  return {
    ...loadConfig({}),
    host: '127.0.0.1',
    port: 0,
    dataDir,
    partitions: 8,
    logLevel: 'silent',
    // Fast KDF so tests can register many users; production default is 15.
    passwordKdfCostLog2: 10,
    // Off: every test registers its users from 127.0.0.1 (and some count the runtime's alarms);
    // the registration throttle has its own tests.
    registrationsPerAddressMax: 0,
    // Off: SCIM tests provision example.com users without verifying the domain;
    // test/http/scim-hardening.test.ts turns it on.
    scimVerifiedDomainsOnly: false,
    // On: webhook tests deliver to a receiver on 127.0.0.1; test/http/webhooks-guard.test.ts turns it off.
    webhookAllowPrivateTargets: true,
    // Rate limits on, with a default tier no test reaches: every test sends its requests from 127.0.0.1;
    // test/http/rate-limits*.test.ts set low limits through the admin API.
    rateLimitDefaultMaxRequests: 1_000_000_000,
    ...overrides,
  };
}

export async function startTestNode(
  options: { clock?: Clock | 'manual'; dataDir?: string; config?: Partial<NodeConfig>; logger?: pino.Logger; domainResolver?: DomainResolver } = {},
): Promise<TestNode> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'platform-test-'));
  const clock = options.clock === 'manual' ? new ManualClock(Date.now()) : (options.clock ?? undefined);
  const config = testConfig(dataDir, options.config);
  const node = await startNode({ config, clock, logger: options.logger ?? pino({ level: 'silent' }) });
  // DNS for organization domain verification: tests answer from a table, never from the network.
  if (options.domainResolver) node.services.domainResolver = options.domainResolver;
  const url = node.url;
  // One connection pool per started node, closed with it: a node restarted on the same port must
  // never be sent a request down a kept-alive socket of its previous run ("other side closed").
  const dispatcher = new Agent();
  // Every answer is checked against the node's /openapi.json (response-contract.ts); RESPONSE_CONTRACT=0 turns it off.
  const checkContract = process.env.RESPONSE_CONTRACT !== '0';
  let contract: Promise<ResponseContract> | undefined;

  async function request(method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse> {
    const headers: Record<string, string> = { ...opts.headers };
    let body: string | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    const response = await fetch(url + path, { method, headers, body, dispatcher });
    const text = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (checkContract) {
      contract ??= fetch(url + '/openapi.json', { dispatcher })
        .then((r) => r.text())
        .then(contractOf);
      const problem = (await contract).check(method, path, response.status, response.headers.get('content-type'), parsed, text);
      if (problem) throw new Error(`the answer is not what /openapi.json declares: ${problem}`);
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  }

  return {
    node,
    url,
    dataDir,
    clock: node.services.clock,
    request,
    async loginAdmin() {
      const res = await request('POST', '/api/v1/auth/login', { body: { login: config.adminEmail, password: config.adminPassword } });
      if (res.status !== 200) throw new Error(`admin login failed: ${res.status} ${res.text}`);
      return res.body.access_token as string;
    },
    async newUser(prefix = 'user') {
      const n = `${process.pid}${++userCounter}${Math.floor(Math.random() * 1e6)}`;
      const username = `${prefix}${n}`.slice(0, 32);
      const email = `${username}@example.com`;
      const password = 'correct horse battery';
      const res = await request('POST', '/api/v1/auth/register', { body: { email, username, password } });
      if (res.status !== 201) throw new Error(`register failed: ${res.status} ${res.text}`);
      return { token: res.body.access_token, user_id: res.body.user.id, refresh_token: res.body.refresh_token, email, username, password };
    },
    async stop() {
      await node.close();
      await dispatcher.close();
    },
    async destroy() {
      await node.close();
      await dispatcher.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Asserts the conventions' error shape: the status and the stable code (the text on failure). */
export function expectError(res: TestResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ statusCode: status, code });
}
