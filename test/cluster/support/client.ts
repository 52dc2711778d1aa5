/**
 * Plain HTTP helpers for the cluster tests: JSON requests to a node with a
 * bearer token, never throwing on network errors (a killed node is expected).
 */
export interface Reply {
  status: number;
  body: any;
}

export async function call(url: string, method: string, path: string, token?: string, body?: unknown, timeout_ms = 15_000): Promise<Reply> {
  try {
    const response = await fetch(url + path, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeout_ms),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text === '' ? null : JSON.parse(text);
    } catch {
      // Not JSON.
    }
    return { status: response.status, body: parsed };
  } catch (error) {
    return { status: 0, body: String(error) };
  }
}

export async function registerUser(url: string, name: string): Promise<{ token: string; userId: string }> {
  const reply = await call(url, 'POST', '/api/v1/auth/register', undefined, {
    email: `${name}@example.com`,
    username: name,
    password: 'correct horse battery',
  });
  if (reply.status !== 201) throw new Error(`register failed: ${reply.status} ${JSON.stringify(reply.body)}`);
  return { token: reply.body.access_token, userId: reply.body.user.id };
}

export const lockPath = (namespace: string, key: string) => `/api/v1/distributed-state/${namespace}/${key}/lock`;

export interface StatusView {
  node_id: string;
  members: { node_id: string; draining: boolean }[];
  partitions: { partition: number; leader: string | null; epoch: number | null; isr: string[] }[];
}

export async function clusterStatus(url: string): Promise<StatusView | undefined> {
  const reply = await call(url, 'GET', '/cluster/status', undefined, undefined, 2_000);
  return reply.status === 200 ? (reply.body as StatusView) : undefined;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
