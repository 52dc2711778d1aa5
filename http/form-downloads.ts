import type { ReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { Readable } from 'node:stream';
import contentDisposition from 'content-disposition';
import { ServiceError } from '../runtime/index.js';
import type { Attachment } from '../actors/forms/messages.js';

/**
 * Serving a submission's files back (docs/api/forms.md, "Downloads"). The
 * file is on the disk of the node that received the upload (its `node_id`
 * in the attachment record, cluster mode only): that node streams it; any
 * other node passes the request on to it over HTTP and streams the answer
 * back, so a client may ask any node.
 */

/** Set on a request passed on to the node holding the file: that node serves it or fails, it never passes it on again. */
export const ATTACHMENT_HOP_HEADER = 'x-platform-attachment-hop';

/** How long the holding node has to start answering a request passed on to it. */
const HOP_TIMEOUT_MS = 15_000;

/**
 * `attachment` with the file's name (RFC 6266): an ASCII fallback in
 * `filename` (every other character as "?"), and, whenever the name is not
 * plain ASCII, the UTF-8 name in `filename*` (RFC 5987 percent-encoding),
 * which every current browser prefers. The header then holds ASCII only:
 * Node re-decodes a non-ASCII Content-Disposition value sent with a
 * Content-Length as UTF-8 (nodejs/node#46528), so an ISO-8859-1 fallback
 * ("ä", byte E4) went out as byte FD.
 */
export function attachmentDisposition(file_name: string): string {
  return contentDisposition(file_name, { type: 'attachment', fallback: file_name.replace(/[^\x20-\x7e]/g, '?') });
}

/** The headers of a download: the sniffed type, never sniffed again by the browser, and the file's name for saving. */
export function downloadHeaders(attachment: Attachment): Record<string, string> {
  return {
    'content-type': attachment.content_type,
    'content-length': String(attachment.size_bytes),
    'content-disposition': attachmentDisposition(attachment.file_name ?? attachment.blob_id),
    etag: etagOf(attachment),
    'x-content-type-options': 'nosniff',
    // Behind a bearer token: only the client's own cache, which revalidates (a 304 costs one read of the submission).
    'cache-control': 'private, no-cache',
  };
}

/** A file's content never changes: its SHA-256 is its entity tag. */
export function etagOf(attachment: Attachment): string {
  return `"${attachment.sha256}"`;
}

/** If-None-Match names this file (a list, or `*`). */
export function notModified(ifNoneMatch: string | undefined, attachment: Attachment): boolean {
  if (ifNoneMatch === undefined) return false;
  const etag = etagOf(attachment);
  return ifNoneMatch.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || trimmed === etag || trimmed === `W/${etag}`;
  });
}

/**
 * The stored file, opened for reading, or null when it is not on this disk
 * (removed, or a data directory restored without it). A file whose size is
 * not the recorded one is not served: its bytes are not the ones committed.
 */
export async function openStoredFile(dataDir: string, attachment: Attachment): Promise<ReadStream | null> {
  if (attachment.path === undefined) return null;
  const root = resolve(dataDir);
  const path = resolve(root, attachment.path);
  const inside = relative(root, path);
  // The path comes from this service's own record; still, nothing outside DATA_DIR is ever read.
  if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) return null;
  let handle;
  try {
    handle = await open(path, 'r');
  } catch {
    return null;
  }
  try {
    const { size } = await handle.stat();
    if (size === attachment.size_bytes) return handle.createReadStream();
  } catch {
    // Unreadable: not served, as a missing file.
  }
  await handle.close();
  return null;
}

export interface PassedOn {
  status: number;
  headers: Record<string, string>;
  body: Readable | null;
}

/** Passes a download on to the node holding the file (`baseUrl`), with the client's credentials, and returns its answer to stream back. */
export async function passOn(baseUrl: string, url: string, headers: { authorization?: string; ifNoneMatch?: string }): Promise<PassedOn> {
  const sent: Record<string, string> = { [ATTACHMENT_HOP_HEADER]: '1' };
  if (headers.authorization !== undefined) sent.authorization = headers.authorization;
  if (headers.ifNoneMatch !== undefined) sent['if-none-match'] = headers.ifNoneMatch;
  let response: Response;
  try {
    response = await fetch(new URL(url, baseUrl), { headers: sent, signal: AbortSignal.timeout(HOP_TIMEOUT_MS), redirect: 'manual' });
  } catch (error) {
    throw unavailable(`The node holding this file did not answer (${(error as Error).message}).`);
  }
  const kept: Record<string, string> = {};
  for (const name of ['content-type', 'content-length', 'content-disposition', 'etag', 'x-content-type-options', 'cache-control', 'retry-after']) {
    const value = response.headers.get(name);
    if (value !== null) kept[name] = value;
  }
  return { status: response.status, headers: kept, body: response.body === null ? null : Readable.fromWeb(response.body as import('node:stream/web').ReadableStream) };
}

export function unavailable(message: string): ServiceError {
  return new ServiceError('attachment_unavailable', message, { retryAfterSeconds: 5 });
}
