import { isServiceError, ServiceError, type ErrorCode } from '../../runtime/index.js';
import { errorCodes } from '../../runtime/index.js';
import type { WireError } from './frames.js';

/** A ServiceError crosses nodes as its code, message and details; anything else as internal_error. */
export function toWireError(error: unknown): WireError {
  if (isServiceError(error)) {
    return { code: error.code, message: error.message, details: error.details, retry_after_seconds: error.retryAfterSeconds };
  }
  return { code: 'internal_error', message: 'Internal error on the partition leader.' };
}

export function fromWireError(wire: WireError): ServiceError {
  const code = (wire.code in errorCodes ? wire.code : 'internal_error') as ErrorCode;
  return new ServiceError(code, wire.message, { details: wire.details, retryAfterSeconds: wire.retry_after_seconds });
}
