import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { existsSync, readdirSync, readFileSync, statSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNode, type TestNode } from '../helpers/node.js';

/** Multipart form submissions over the real socket: files streamed to the blob store, sniffed, bounded (docs/api/forms.md, "Multipart"). */
let t: TestNode;
let alice: Awaited<ReturnType<TestNode['newUser']>>;
const base = '/api/v1/forms';
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(600, 7)]);
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n'), Buffer.alloc(100, 0x20)]);

beforeAll(async () => {
  t = await startTestNode({ config: { accessTokenTtlSeconds: 86_400 } });
  alice = await t.newUser('alice');
});
afterAll(async () => {
  await t?.destroy();
});

async function multipartForm(multipart: Record<string, unknown>): Promise<string> {
  const res = await t.request('POST', base, {
    token: alice.token,
    body: { name: 'upload', title: 'Upload', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }, multipart: { enabled: true, ...multipart } },
  });
  expect(res.status, res.text).toBe(201);
  expect((await t.request('POST', `${base}/${res.body.form_id}/status`, { token: alice.token, body: { status: 'active' } })).status).toBe(200);
  return res.body.form_id;
}

async function send(form_id: string, data: unknown, files: { field: string; name: string; type: string; bytes: Buffer }[]) {
  const body = new FormData();
  if (data !== undefined) body.append('data', typeof data === 'string' ? data : JSON.stringify(data));
  for (const file of files) body.append(file.field, new Blob([file.bytes], { type: file.type }), file.name);
  const response = await fetch(`${t.url}${base}/${form_id}/submissions/multipart`, { method: 'POST', headers: { authorization: `Bearer ${alice.token}` }, body });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, text };
}

/** Every file under the node's blob store. */
function blobFiles(): string[] {
  const root = join(t.dataDir, 'form-blobs');
  const found: string[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else found.push(path);
    }
  };
  walk(root);
  return found;
}

describe('multipart submissions', () => {
  it('stores each file on disk with its sniffed type, size and sha256, committed with the submission', async () => {
    const id = await multipartForm({ allowed_content_types: ['image/png', 'application/pdf'], max_files: 2 });
    const before = blobFiles().length;
    const res = await send(id, { name: 'Ada' }, [
      { field: 'avatar', name: 'a.png', type: 'image/png', bytes: PNG },
      { field: 'cv', name: 'cv.pdf', type: 'application/octet-stream', bytes: PDF },
    ]);
    expect(res.status, res.text).toBe(201);
    const read = await t.request('GET', `${base}/${id}/submissions/${res.body.submission_id}`, { token: alice.token });
    const attachments = read.body.attachments as { field: string; content_type: string; size_bytes: number; sha256: string; blob_id: string }[];
    expect(attachments.map((a) => [a.field, a.content_type, a.size_bytes]).sort()).toEqual([['avatar', 'image/png', PNG.length], ['cv', 'application/pdf', PDF.length]]);
    expect(attachments.find((a) => a.field === 'avatar')!.sha256).toBe(createHash('sha256').update(PNG).digest('hex'));
    const files = blobFiles();
    expect(files.length - before).toBe(2);
    const stored = files.find((path) => path.endsWith(attachments.find((a) => a.field === 'avatar')!.blob_id))!;
    expect(readFileSync(stored).equals(PNG)).toBe(true);
  });

  it('refuses by content, not by declared type, and leaves no file behind', async () => {
    const id = await multipartForm({ allowed_content_types: ['image/png'], max_files: 1 });
    const before = blobFiles().length;
    const disguised = await send(id, { name: 'x' }, [{ field: 'f', name: 'a.png', type: 'image/png', bytes: PDF }]);
    expect(disguised.status, disguised.text).toBe(400);
    expect(disguised.body).toMatchObject({ code: 'file_rejected', details: { reason: 'type_not_allowed', sniffed_type: 'application/pdf' } });
    const mislabelled = await multipartForm({ allowed_content_types: ['image/png', 'application/pdf'] });
    const mismatch = await send(mislabelled, { name: 'x' }, [{ field: 'f', name: 'a.pdf', type: 'application/pdf', bytes: PNG }]);
    expect(mismatch.body).toMatchObject({ code: 'file_rejected', details: { reason: 'type_mismatch' } });
    const many = await send(id, { name: 'x' }, [{ field: 'a', name: 'a.png', type: 'image/png', bytes: PNG }, { field: 'b', name: 'b.png', type: 'image/png', bytes: PNG }]);
    expect(many.body).toMatchObject({ code: 'file_rejected', details: { reason: 'too_many_files' } });
    const invalid = await send(id, { nope: 1 }, [{ field: 'a', name: 'a.png', type: 'image/png', bytes: PNG }]);
    expect(invalid.body).toMatchObject({ code: 'submission_invalid' });
    const noData = await send(id, undefined, [{ field: 'a', name: 'a.png', type: 'image/png', bytes: PNG }]);
    expect(noData.status).toBe(400);
    const badJson = await send(id, '{not json', []);
    expect(badJson.status).toBe(400);
    expect(blobFiles().length).toBe(before);
  });

  it('refuses forms without multipart, and bodies that are not multipart', async () => {
    const plain = await t.request('POST', base, { token: alice.token, body: { name: 'p', title: 'p', schema: { type: 'object' } } });
    await t.request('POST', `${base}/${plain.body.form_id}/status`, { token: alice.token, body: { status: 'active' } });
    expect((await send(plain.body.form_id, {}, [])).body).toMatchObject({ code: 'conflict' });
    const id = await multipartForm({ allowed_content_types: ['image/png'] });
    const json = await t.request('POST', `${base}/${id}/submissions/multipart`, { token: alice.token, body: { data: {} } });
    expect(json.status).toBe(415);
    const enabledWithoutTypes = await t.request('POST', base, { token: alice.token, body: { name: 'p', title: 'p', schema: { type: 'object' }, multipart: { enabled: true } } });
    expect(enabledWithoutTypes.status).toBe(400);
  });

  it('reads the data field by the JSON body rules: no __proto__ or constructor.prototype key, nesting bounded, no lone surrogate', async () => {
    const id = await multipartForm({ allowed_content_types: ['image/png'] });
    for (const [data, problem] of [
      ['{"name":"x","__proto__":{"polluted":1}}', 'holds a __proto__ or constructor.prototype key; such keys are refused'],
      ['{"name":"x","constructor":{"prototype":{"p":1}}}', 'holds a __proto__ or constructor.prototype key; such keys are refused'],
      [`{"name":"x","deep":${'['.repeat(150)}${']'.repeat(150)}}`, 'nests arrays and objects deeper than 100 levels'],
      ['{"name":"\\ud800"}', 'holds a string with an unpaired UTF-16 surrogate escape'],
      ['{"name":', 'is not JSON'],
    ]) {
      const res = await send(id, data, []);
      expect(res.status, data).toBe(400);
      expect(res.body, data).toMatchObject({ code: 'BAD_REQUEST', details: [{ field: 'body.data', message: problem }] });
    }
    // A constructor key that is plain data stays accepted.
    expect((await send(id, { name: 'x', constructor: 'ok' }, [])).status).toBe(201);
  });

  it('a file over max_file_bytes is refused while streaming: memory does not grow with it', async () => {
    const id = await multipartForm({ allowed_content_types: ['text/plain'], max_file_bytes: 1024 * 1024 });
    const before = blobFiles().length;
    const boundary = 'xBOUNDARYx';
    const FILE_BYTES = 96 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 'a');
    let sent = 0;
    const head = Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="data"\r\n\r\n{"name":"big"}\r\n--${boundary}\r\nContent-Disposition: form-data; name="f"; filename="big.txt"\r\nContent-Type: text/plain\r\n\r\n`);
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    let phase = 0;
    let peak_rss = 0;
    (globalThis as { gc?: () => void }).gc?.();
    const rss_before = process.memoryUsage().rss;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        peak_rss = Math.max(peak_rss, process.memoryUsage().rss);
        if (phase === 0) {
          phase = 1;
          controller.enqueue(head);
        } else if (sent < FILE_BYTES) {
          sent += chunk.length;
          controller.enqueue(chunk);
        } else {
          controller.enqueue(tail);
          controller.close();
        }
      },
    });
    const response = await fetch(`${t.url}${base}/${id}/submissions/multipart`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    const body = await response.json();
    expect(response.status).toBe(413);
    expect(body).toMatchObject({ code: 'payload_too_large', details: { reason: 'file_too_large' } });
    const growth_mib = (peak_rss - rss_before) / 1024 / 1024;
    // 96 MiB went through the node (in this process, with the client); a generous bound far below the file.
    expect(growth_mib).toBeLessThan(48);
    expect(blobFiles().length).toBe(before);
  }, 60_000);
});

describe('downloads', () => {
  async function download(path: string, token: string, headers: Record<string, string> = {}) {
    const response = await fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
    return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) };
  }

  it('serves each file back as uploaded, to its submitter and the form owner only, with its type, name and SHA-256 ETag', async () => {
    const id = await multipartForm({ allowed_content_types: ['image/png', 'application/pdf'], max_files: 2 });
    const res = await send(id, { name: 'Ada' }, [
      { field: 'avatar', name: '€ report.png', type: 'image/png', bytes: PNG },
      { field: 'cv', name: 'cv.pdf', type: 'application/octet-stream', bytes: PDF },
    ]);
    expect(res.status, res.text).toBe(201);
    const read = await t.request('GET', `${base}/${id}/submissions/${res.body.submission_id}`, { token: alice.token });
    const byField = Object.fromEntries((read.body.attachments as { field: string; blob_id: string }[]).map((a) => [a.field, a.blob_id]));
    // The name as the client sent it (UTF-8), not re-decoded as latin1.
    expect(read.body.attachments.find((a: { field: string }) => a.field === 'avatar').file_name).toBe('€ report.png');
    const path = (blob: string) => `${base}/${id}/submissions/${res.body.submission_id}/attachments/${blob}`;

    const png = await download(path(byField.avatar), alice.token);
    expect(png.status).toBe(200);
    expect(png.bytes.equals(PNG)).toBe(true);
    expect(png.headers.get('content-type')).toBe('image/png');
    expect(png.headers.get('content-length')).toBe(String(PNG.length));
    expect(png.headers.get('x-content-type-options')).toBe('nosniff');
    // RFC 6266: an ISO-8859-1 fallback name, and the UTF-8 one in filename*.
    expect(png.headers.get('content-disposition')).toBe(`attachment; filename="? report.png"; filename*=UTF-8''%E2%82%AC%20report.png`);
    const etag = `"${createHash('sha256').update(PNG).digest('hex')}"`;
    expect(png.headers.get('etag')).toBe(etag);
    // The declared type was octet-stream; the sniffed one is served.
    const pdf = await download(path(byField.cv), alice.token);
    expect([pdf.status, pdf.headers.get('content-type'), pdf.bytes.equals(PDF)]).toEqual([200, 'application/pdf', true]);

    // Revalidation: the ETag gives 304 and no body.
    const again = await download(path(byField.avatar), alice.token, { 'if-none-match': etag });
    expect([again.status, again.bytes.length, again.headers.get('etag')]).toEqual([304, 0, etag]);
    expect((await download(path(byField.avatar), alice.token, { 'if-none-match': '"other"' })).status).toBe(200);

    // Another user of the tenant is neither the submitter nor an owner: the submission is not theirs to read.
    const mallory = await t.newUser('mallory');
    const refused = await download(path(byField.avatar), mallory.token);
    expect(refused.status).toBeGreaterThanOrEqual(403);
    expect(refused.status).toBeLessThan(405);
    expect(refused.bytes.toString()).not.toContain('PNG');
    // No token: 401.
    expect((await fetch(`${t.url}${path(byField.avatar)}`)).status).toBe(401);
    // An id the submission does not have: 404 in the error shape.
    const unknown = await t.request('GET', path('blob_nope'), { token: alice.token });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'not_found']);
  });

  it('names a non-ASCII file in ASCII header bytes: a fallback with ? in filename, RFC 5987 UTF-8 in filename*', async () => {
    // The raw header line as sent (node:http, whose header strings are latin1: one character per byte, nothing re-decoded).
    const rawDisposition = (path: string) => new Promise<Buffer>((resolve, reject) => {
      const url = new URL(`${t.url}${path}`);
      const sent = httpRequest({ host: url.hostname, port: url.port, path: url.pathname, headers: { authorization: `Bearer ${alice.token}` } }, (response) => {
        response.resume();
        const index = response.rawHeaders.findIndex((name, at) => at % 2 === 0 && name.toLowerCase() === 'content-disposition');
        resolve(Buffer.from(response.rawHeaders[index + 1] ?? '', 'latin1'));
      });
      sent.on('error', reject);
      sent.end();
    });
    const id = await multipartForm({ allowed_content_types: ['text/plain'], max_files: 3 });
    const names = ['ä.png', 'résumé 日本.txt', 'plain name.txt'];
    const res = await send(id, { name: 'Ada' }, names.map((name, index) => ({ field: `f${index}`, name, type: 'text/plain', bytes: Buffer.from(`hello ${index}`) })));
    expect(res.status, res.text).toBe(201);
    const read = await t.request('GET', `${base}/${id}/submissions/${res.body.submission_id}`, { token: alice.token });
    const blobOf = (field: string) => (read.body.attachments as { field: string; blob_id: string }[]).find((a) => a.field === field)!.blob_id;
    const path = (field: string) => `${base}/${id}/submissions/${res.body.submission_id}/attachments/${blobOf(field)}`;
    const latin1 = (text: string) => Buffer.from(text, 'latin1');

    // Every byte of the header is ASCII: a non-ASCII character is "?" in the fallback, its UTF-8 percent-encoded in filename*.
    const umlaut = await rawDisposition(path('f0'));
    expect(umlaut.toString('hex')).toBe(latin1(`attachment; filename="?.png"; filename*=UTF-8''%C3%A4.png`).toString('hex'));
    const mixed = await rawDisposition(path('f1'));
    expect(mixed.toString('hex')).toBe(latin1(`attachment; filename="r?sum? ??.txt"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%E6%97%A5%E6%9C%AC.txt`).toString('hex'));
    // A plain ASCII name needs no filename*.
    expect((await rawDisposition(path('f2'))).toString('latin1')).toBe('attachment; filename="plain name.txt"');
  });

  it('does not serve a stored file whose size is not the recorded one', async () => {
    const id = await multipartForm({ allowed_content_types: ['image/png'], max_files: 1 });
    const res = await send(id, { name: 'Ada' }, [{ field: 'avatar', name: 'a.png', type: 'image/png', bytes: PNG }]);
    expect(res.status, res.text).toBe(201);
    const read = await t.request('GET', `${base}/${id}/submissions/${res.body.submission_id}`, { token: alice.token });
    const blob = read.body.attachments[0].blob_id as string;
    truncateSync(blobFiles().find((file) => file.endsWith(blob))!, 10);
    const cut = await t.request('GET', `${base}/${id}/submissions/${res.body.submission_id}/attachments/${blob}`, { token: alice.token });
    expect([cut.status, cut.body.code]).toEqual([404, 'not_found']);
  });
});
