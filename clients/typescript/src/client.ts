import createClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import type { HttpMethod, MediaType, PathsWithMethod, RequiredKeysOf } from 'openapi-typescript-helpers';
import type { paths } from './schema.js';
import { memoryTokenStore, type Tokens, type TokenStore } from './tokens.js';
import { Transport } from './transport.js';
import type { RetryOptions } from './retry-policy.js';

export interface PlatformClientOptions {
  /** The node (or load balancer) URL, e.g. `https://platform.example.com`. */
  baseUrl: string;
  /** Where the session's tokens live: a store, or tokens to start with (kept in memory). Default: empty, in memory. */
  tokens?: TokenStore | Tokens;
  /** Retries of 429, 503 and lost connections. */
  retry?: RetryOptions;
  /** Add an `Idempotency-Key` to every POST that has none, so a retried POST is not applied twice (default true). */
  idempotencyKeys?: boolean;
  /** Headers sent with every request (a `User-Agent`, say). */
  headers?: Record<string, string>;
  /** The fetch to send with (default: the global fetch). */
  fetch?: (request: Request) => Promise<Response>;
  /** Called when the refresh token is refused: the user must sign in again. */
  onSessionEnded?: () => void;
}

// openapi-fetch's own (unexported) rule: the init argument is optional when nothing in it is required.
type InitParam<Init> = RequiredKeysOf<Init> extends never ? [(Init & { [key: string]: unknown })?] : [Init & { [key: string]: unknown }];

/** What a successful call answers: the 2xx body, typed from the operation (undefined for a 204). Picks the union member whose `data` is required: the success one. */
export type SuccessData<Operation, Init> = Operation extends Record<string | number, any>
  ? Extract<FetchResponse<Operation, Init, MediaType>, { data: unknown }>['data']
  : never;

/** A typed call that resolves to the 2xx body and throws ApiError for an error answer. */
export type CallMethod<M extends HttpMethod> = <Path extends PathsWithMethod<paths, M>, Init extends MaybeOptionalInit<paths[Path], M>>(
  path: Path,
  ...init: InitParam<Init>
) => Promise<SuccessData<paths[Path][M], Init>>;

export interface PlatformClient {
  get: CallMethod<'get'>;
  post: CallMethod<'post'>;
  put: CallMethod<'put'>;
  patch: CallMethod<'patch'>;
  delete: CallMethod<'delete'>;
  /**
   * The openapi-fetch client underneath, for the response itself (headers,
   * status). It shares the transport: error answers throw ApiError there too.
   */
  raw: Client<paths>;
  baseUrl: string;
  tokens: TokenStore;
  /** Refreshes now (shared with a refresh already running); null when the session has ended. */
  refreshTokens(): Promise<Tokens | null>;
}

function isTokenStore(value: TokenStore | Tokens): value is TokenStore {
  return typeof (value as TokenStore).get === 'function';
}

/**
 * The typed client: every operation of /openapi.json, its path, parameters,
 * body and answer checked by TypeScript.
 *
 * ```ts
 * const api = createPlatformClient({ baseUrl: 'http://localhost:3000' });
 * await api.post('/api/v1/auth/login', { body: { login, password } }); // tokens stored
 * const me = await api.get('/api/v1/auth/me');
 * ```
 */
export function createPlatformClient(options: PlatformClientOptions): PlatformClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const tokens = options.tokens === undefined ? memoryTokenStore() : isTokenStore(options.tokens) ? options.tokens : memoryTokenStore(options.tokens);
  const transport = new Transport({
    baseUrl,
    tokens,
    retry: options.retry,
    idempotencyKeys: options.idempotencyKeys,
    fetch: options.fetch,
    onSessionEnded: options.onSessionEnded,
  });
  const raw = createClient<paths>({ baseUrl, fetch: transport.fetch, headers: options.headers });
  // Error answers never come back as `{error}`: the transport throws them. So `data` is the answer.
  const call =
    (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE') =>
    async (path: string, init?: object): Promise<unknown> =>
      (await (raw.request as (method: string, path: string, init?: object) => Promise<{ data?: unknown }>)(method, path, init)).data;
  return {
    get: call('GET') as CallMethod<'get'>,
    post: call('POST') as CallMethod<'post'>,
    put: call('PUT') as CallMethod<'put'>,
    patch: call('PATCH') as CallMethod<'patch'>,
    delete: call('DELETE') as CallMethod<'delete'>,
    raw,
    baseUrl,
    tokens,
    refreshTokens: () => transport.refreshTokens(),
  };
}
