import type { ErrorCode } from './error-codes.js';

/**
 * An error answer of the service as a typed error: every error body has the
 * shape `{statusCode, code, error, message, details?}` (docs/errors.md), and
 * `code` is the stable thing to branch on.
 *
 * `code` is typed with the codes this client was generated against; a newer
 * node may answer a code this client does not know yet, so it stays a string.
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  /** The HTTP status. */
  readonly status: number;
  /** The stable error code, e.g. `lock_held`. A body that is not an error body (a proxy's HTML page) gives `http_<status>`. */
  readonly code: ErrorCode | (string & {});
  /** The body's `details`, when it has them (the failing fields of a BAD_REQUEST, ...). */
  readonly details: unknown;
  /** The whole decoded body (JSON), or its text when it is not JSON. */
  readonly body: unknown;
  readonly method: string;
  readonly url: string;

  constructor(init: { status: number; code: string; message: string; details?: unknown; body: unknown; method: string; url: string }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.body = init.body;
    this.method = init.method;
    this.url = init.url;
  }

  /** Reads an error response to `method url` (consumes its body). */
  static async fromResponse(response: Response, method: string, url: string): Promise<ApiError> {
    const text = await response.text().catch(() => '');
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON: a proxy or load balancer answered; keep the text.
    }
    const shaped = typeof body === 'object' && body !== null ? (body as { code?: unknown; message?: unknown; details?: unknown }) : {};
    const code = typeof shaped.code === 'string' ? shaped.code : `http_${response.status}`;
    const message = typeof shaped.message === 'string' ? shaped.message : `${method} ${url} answered ${response.status}`;
    return new ApiError({ status: response.status, code, message, details: shaped.details, body, method, url });
  }
}

/** True for an ApiError, optionally of one code: `if (isApiError(error, 'lock_held')) ...`. */
export function isApiError(error: unknown, code?: ErrorCode): error is ApiError {
  return error instanceof ApiError && (code === undefined || error.code === code);
}
