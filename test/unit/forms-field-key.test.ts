import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formsFieldKey } from '../../http/form-uploads.js';
import { loadConfig } from '../../http/config.js';
import type { ClusterConfig } from '../../cluster/config.js';

const dir = mkdtempSync(join(tmpdir(), 'forms-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const configured = Buffer.alloc(32, 7).toString('base64');
const someCluster = {} as ClusterConfig;

describe('the forms field key', () => {
  it('is FORMS_FIELD_KEY when set, on an embedded node and on a cluster node alike', () => {
    expect(formsFieldKey({ formsFieldKey: configured, dataDir: dir, cluster: undefined })).toEqual(Buffer.alloc(32, 7));
    expect(formsFieldKey({ formsFieldKey: configured, dataDir: dir, cluster: someCluster })).toEqual(Buffer.alloc(32, 7));
  });

  it('unset: an embedded node keeps its own in DATA_DIR (mode 0600, the same across starts); a cluster node has none', () => {
    const first = formsFieldKey({ formsFieldKey: '', dataDir: dir, cluster: undefined })!;
    expect(first).toHaveLength(32);
    expect(formsFieldKey({ formsFieldKey: '', dataDir: dir, cluster: undefined })).toEqual(first);
    expect(Buffer.from(readFileSync(join(dir, 'forms-field.key'), 'utf8').trim(), 'base64')).toEqual(first);
    expect(statSync(join(dir, 'forms-field.key')).mode & 0o777).toBe(0o600);
    expect(formsFieldKey({ formsFieldKey: '', dataDir: dir, cluster: someCluster })).toBeNull();
  });

  it('refuses a FORMS_FIELD_KEY that is not base64 of 32 bytes', () => {
    expect(() => loadConfig({ FORMS_FIELD_KEY: 'short' })).toThrow(/FORMS_FIELD_KEY must be base64 of 32 random bytes/);
    expect(loadConfig({ FORMS_FIELD_KEY: configured }).formsFieldKey).toBe(configured);
  });
});
