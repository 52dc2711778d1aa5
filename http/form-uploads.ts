import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import busboy from 'busboy';
import { ServiceError } from '../runtime/index.js';
import type { Attachment, MultipartSettings } from '../actors/forms/messages.js';
import { parseJsonText } from './plugins/json-body.js';
import type { NodeConfig } from './config.js';
import { readOrCreateKeyFile } from './node-key-file.js';
import { collectYoung } from './young-collector.js';

/**
 * Multipart form submissions at the edge (docs/api/forms.md, "Multipart"):
 * the request body is parsed as it arrives (busboy), each file streamed to
 * the blob store under DATA_DIR/form-blobs while its SHA-256 and size are
 * counted, its type sniffed from its first bytes, and max_file_bytes and
 * max_files enforced as the bytes come (busboy's limits), never by
 * buffering a file. A refused upload deletes every file it wrote.
 */

/** The sniffing table: content type and the magic bytes it starts with (`null`: any byte). */
const SIGNATURES: { type: string; bytes: (number | null)[] }[] = [
  { type: 'image/png', bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', bytes: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', bytes: [0x47, 0x49, 0x46, 0x38, null, 0x61] },
  { type: 'image/webp', bytes: [0x52, 0x49, 0x46, 0x46, null, null, null, null, 0x57, 0x45, 0x42, 0x50] },
  { type: 'application/pdf', bytes: [0x25, 0x50, 0x44, 0x46, 0x2d] },
  { type: 'application/zip', bytes: [0x50, 0x4b, 0x03, 0x04] },
  { type: 'application/gzip', bytes: [0x1f, 0x8b, 0x08] },
];
/** Every type the sniffer can tell; a form's allowed_content_types must be among them. */
export const SNIFFABLE_TYPES = [...SIGNATURES.map((signature) => signature.type), 'text/plain'] as const;
const SNIFF_BYTES = 512;
/** How many bytes an upload streams between two young-generation collections (http/young-collector.ts). */
const COLLECT_EVERY_BYTES = 4 * 1024 * 1024;
let uncollected = 0;

/**
 * The content type of a file from its first bytes: a signature of the table,
 * else `text/plain` when the bytes hold no NUL and decode as UTF-8 (a
 * multi-byte character cut at the end of the sample is allowed), else null.
 */
export function sniffContentType(head: Buffer): string | null {
  for (const signature of SIGNATURES) {
    if (head.length >= signature.bytes.length && signature.bytes.every((byte, i) => byte === null || head[i] === byte)) return signature.type;
  }
  if (head.length === 0 || head.includes(0)) return null;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, trimPartialUtf8(head)));
    return 'text/plain';
  } catch {
    return null;
  }
}

/** The length of `head` without a UTF-8 sequence cut at its end. */
function trimPartialUtf8(head: Buffer): number {
  for (let back = 1; back <= Math.min(3, head.length); back++) {
    const byte = head[head.length - back];
    if ((byte & 0xc0) === 0x80) continue;
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? head.length - back : head.length;
  }
  return head.length;
}

export interface ParsedUpload {
  data: Record<string, unknown>;
  attachments: Attachment[];
  /** Deletes every file written (the submission was refused after the upload). */
  discard(): Promise<void>;
}

function refused(reason: string, message: string, details: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('file_rejected', message, { details: { reason, ...details } });
}

/**
 * Streams a multipart body: the `data` field (JSON object text, at most
 * data_bytes_max) and file fields. Files go to `directory` under fresh blob
 * ids. Rejects (and leaves no file) on: a file over max_file_bytes (413
 * payload_too_large), more than max_files files, a sniffed type that is not
 * allowed, a declared type that differs from the sniffed one, a body that is
 * not multipart or has no data field.
 */
export async function receiveUpload(
  raw: Readable,
  headers: Record<string, string | string[] | undefined>,
  settings: MultipartSettings,
  directory: string,
  data_bytes_max: number,
): Promise<ParsedUpload> {
  mkdirSync(directory, { recursive: true });
  const written: string[] = [];
  const attachments: Attachment[] = [];
  const discard = async () => {
    await Promise.all(written.map((path) => rm(path, { force: true })));
  };
  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: headers as busboy.BusboyConfig['headers'],
      // Browsers and fetch's FormData send file names as raw UTF-8 (the HTML standard's
      // multipart/form-data encoding); busboy's default, latin1, turned "€.png" into mojibake.
      defParamCharset: 'utf8',
      limits: { fileSize: settings.max_file_bytes, files: settings.max_files, fields: 10, fieldSize: data_bytes_max, parts: settings.max_files + 10 },
    });
  } catch (error) {
    throw new ServiceError('unsupported_media_type', `The body must be multipart/form-data with a boundary: ${(error as Error).message}`);
  }

  let failure: ServiceError | null = null;
  let dataText: string | null = null;
  const pending: Promise<void>[] = [];
  const fail = (error: ServiceError) => {
    failure ??= error;
  };

  parser.on('field', (name, value, info) => {
    if (name !== 'data') return;
    if (info.valueTruncated) fail(new ServiceError('BAD_REQUEST', `The data field must be at most ${data_bytes_max} bytes.`, { details: [{ field: 'body.data', message: 'is too large' }] }));
    dataText = value;
  });
  parser.on('filesLimit', () => fail(refused('too_many_files', `At most ${settings.max_files} files per submission.`, { max_files: settings.max_files })));
  parser.on('file', (field, file, info) => {
    if (failure) {
      file.resume();
      return;
    }
    const blob_id = `blob_${randomBytes(16).toString('base64url')}`;
    const temporary = join(directory, `${blob_id}.part`);
    const final = join(directory, blob_id);
    written.push(temporary, final);
    const hash = createHash('sha256');
    let size = 0;
    let head = Buffer.alloc(0);
    let sniffed: string | null | undefined;
    const decide = () => {
      sniffed = sniffContentType(head);
      if (sniffed === null || !settings.allowed_content_types.includes(sniffed)) {
        return refused('type_not_allowed', `File ${field}: its content is ${sniffed ?? 'of no known type'}, not one of ${settings.allowed_content_types.join(', ')}.`, { field, sniffed_type: sniffed });
      }
      const declared = info.mimeType.toLowerCase();
      if (declared !== sniffed && declared !== 'application/octet-stream') {
        return refused('type_mismatch', `File ${field} is declared ${declared} but its content is ${sniffed}.`, { field, declared_type: declared, sniffed_type: sniffed });
      }
      return null;
    };
    // flush: the file is fsync'd before it is closed, so a committed submission never names a file lost in a crash.
    // The meter never fails the pipeline: a refused file is drained to the end
    // (its bytes dropped), so busboy keeps parsing and memory stays flat.
    let rejected = false;
    const reject = (error: ServiceError | null) => {
      if (!error) return;
      rejected = true;
      fail(error);
    };
    const meter = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        if (rejected || failure) return callback();
        size += chunk.length;
        uncollected += chunk.length;
        if (uncollected >= COLLECT_EVERY_BYTES) {
          uncollected = 0;
          collectYoung();
        }
        hash.update(chunk);
        if (sniffed === undefined) {
          head = Buffer.concat([head, chunk.subarray(0, SNIFF_BYTES - head.length)]);
          if (head.length >= SNIFF_BYTES) {
            reject(decide());
            if (rejected) return callback();
          }
        }
        callback(null, chunk);
      },
      flush(callback) {
        if (!rejected && sniffed === undefined) reject(decide());
        callback();
      },
    });
    file.on('limit', () => {
      reject(new ServiceError('payload_too_large', `File ${field} is larger than max_file_bytes (${settings.max_file_bytes}).`, { details: { reason: 'file_too_large', field, max_file_bytes: settings.max_file_bytes } }));
    });
    pending.push(
      pipeline(file, meter, createWriteStream(temporary, { flags: 'wx', flush: true })).then(
        async () => {
          if (failure || rejected) return;
          await rename(temporary, final);
          attachments.push({ blob_id, field, content_type: sniffed!, declared_type: info.mimeType, file_name: info.filename ?? null, size_bytes: size, sha256: hash.digest('hex') });
        },
        (error: unknown) => {
          fail(error instanceof ServiceError ? error : new ServiceError('BAD_REQUEST', `File ${field} could not be received: ${(error as Error).message}`));
        },
      ),
    );
  });

  try {
    await new Promise<void>((resolve, reject) => {
      parser.on('close', resolve);
      parser.on('error', (error: Error) => reject(new ServiceError('BAD_REQUEST', `The multipart body is malformed: ${error.message}`)));
      raw.on('error', reject);
      raw.pipe(parser);
    });
    await Promise.all(pending);
  } catch (error) {
    await Promise.allSettled(pending);
    await discard();
    throw error instanceof ServiceError ? error : new ServiceError('BAD_REQUEST', `The multipart body could not be read: ${(error as Error).message}`);
  }
  if (!failure && dataText === null) failure = new ServiceError('BAD_REQUEST', 'The multipart body needs a data field holding the submission as a JSON object.', { details: [{ field: 'body.data', message: 'is required' }] });
  let data: unknown;
  if (!failure) {
    const parsed = parseJsonText(dataText!);
    if ('problem' in parsed) failure = new ServiceError('BAD_REQUEST', `The data field ${parsed.problem}.`, { details: [{ field: 'body.data', message: parsed.problem }] });
    else data = parsed.value;
    if (!failure && (data === null || typeof data !== 'object' || Array.isArray(data))) {
      failure = new ServiceError('BAD_REQUEST', 'The data field must be a JSON object.', { details: [{ field: 'body.data', message: 'must be an object' }] });
    }
  }
  if (failure) {
    await discard();
    throw failure;
  }
  return { data: data as Record<string, unknown>, attachments, discard };
}

/** Where a form's blobs live: DATA_DIR/form-blobs/<sha256(form key) prefix>. */
export function blobDirectory(dataDir: string, tenant: string, form_id: string): string {
  const digest = createHash('sha256').update(JSON.stringify([tenant, form_id])).digest('hex');
  return join(dataDir, 'form-blobs', digest.slice(0, 2), digest.slice(2, 34));
}

/** Removes a blob directory (tests). */
export function removeBlobs(directory: string): void {
  rmSync(directory, { recursive: true, force: true });
}

const FIELD_KEY_FILE = 'forms-field.key';

/**
 * The node's key for encrypted form fields: FORMS_FIELD_KEY when set (a cluster's nodes share
 * it: a submission's actor may run on any of them after a failover). Otherwise an embedded node
 * keeps its own in DATA_DIR/forms-field.key, and a cluster node has none: forms with encrypted
 * fields are refused there until the key is configured.
 */
export function formsFieldKey(config: Pick<NodeConfig, 'formsFieldKey' | 'dataDir' | 'cluster'>): Buffer | null {
  if (config.formsFieldKey) return Buffer.from(config.formsFieldKey, 'base64');
  if (config.cluster) return null;
  return readOrCreateKeyFile(join(config.dataDir, FIELD_KEY_FILE));
}
