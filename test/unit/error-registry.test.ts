import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { errorCodes } from '../../runtime/index.js';

describe('error registry', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Map<string, number>();
  for (const match of doc.matchAll(/^\| `([^`]+)` \| (\d{3}) \|/gm)) documented.set(match[1], Number(match[2]));

  it('documents every code with its status', () => {
    for (const [code, { status }] of Object.entries(errorCodes)) {
      expect(documented.get(code), `docs/errors.md is missing ${code}`).toBe(status);
    }
  });

  it('documents no code that does not exist', () => {
    for (const code of documented.keys()) expect(Object.keys(errorCodes)).toContain(code);
  });

  it('documents the wire value of every code of a standard\'s format (OAuth error, SCIM scimType)', () => {
    const wires = new Map<string, string>();
    for (const match of doc.matchAll(/^\| `([^`]+)` \| \d{3} \| `([^`]+)` \|/gm)) wires.set(match[1], match[2]);
    for (const [code, entry] of Object.entries(errorCodes)) {
      const wire = (entry as { wire?: string }).wire;
      expect(wires.get(code), `docs/errors.md wire value of ${code}`).toBe(wire);
    }
  });

  it('uses only 4xx for client errors and 5xx for defects or overload', () => {
    for (const [code, { status }] of Object.entries(errorCodes)) {
      expect(status >= 400 && status < 600, code).toBe(true);
    }
  });
});
