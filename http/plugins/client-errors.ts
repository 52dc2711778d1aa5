import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { errorCodes, type ErrorCode } from '../../runtime/index.js';

/**
 * Errors Node's HTTP parser raises before Fastify sees a request (a header
 * block over the limit, bytes that are not HTTP, such as a body sent without
 * Content-Length, a client too slow to send its headers) are answered here,
 * on the raw socket, in the conventions' error shape like every other error,
 * and the connection is closed. Fastify's default writes a body without
 * `code`.
 */
function codeFor(error: NodeJS.ErrnoException): ErrorCode {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  if (error.code === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  return 'BAD_REQUEST';
}

const MESSAGES: Partial<Record<ErrorCode, string>> = {
  request_timeout: 'The request was not received in time; the connection is closed.',
  headers_too_large: 'The request headers are larger than the limit (16 KiB).',
  BAD_REQUEST: 'The request is not valid HTTP/1.1 (for example, a body without Content-Length or Transfer-Encoding); the connection is closed.',
};

export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  // A reset connection has nobody left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const code = codeFor(error);
  const statusCode = errorCodes[code].status;
  const body = JSON.stringify({ statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message: MESSAGES[code] });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${statusCode} ${STATUS_CODES[statusCode]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
