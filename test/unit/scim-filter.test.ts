import { describe, expect, it } from 'vitest';
import { errorCodes, ServiceError } from '../../runtime/index.js';
import { FILTER_DEPTH_MAX, FILTER_LENGTH_MAX, matchesFilter, parseFilter, type FilterSubject } from '../../actors/scim/filter.js';

const babs: FilterSubject = {
  id: 'scim_1',
  userName: 'Babs.Jensen@Example.com',
  externalId: 'ext-001',
  displayName: 'Babs Jensen',
  emails: ['babs@example.com', 'BJ@work.example.org'],
  active: true,
};
const kim: FilterSubject = { id: 'scim_2', userName: 'kim', externalId: null, displayName: null, emails: [], active: false };

const match = (filter: string, subject: FilterSubject = babs) => matchesFilter(parseFilter(filter), subject);

/** The scimType and message of a rejected filter. */
function rejection(filter: string): { scimType: unknown; message: string } {
  try {
    parseFilter(filter);
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    const e = error as ServiceError;
    expect(e.code).toBe('scim_invalid_filter');
    return { scimType: (errorCodes[e.code] as { wire?: string }).wire, message: e.message };
  }
  throw new Error(`filter was accepted: ${filter}`);
}

describe('SCIM filter parsing', () => {
  it('parses attr op value into an AST', () => {
    expect(parseFilter('userName eq "bjensen"')).toEqual({ type: 'cmp', op: 'eq', attr: 'userName', value: 'bjensen' });
    expect(parseFilter('title pr'.replace('title', 'externalId'))).toEqual({ type: 'pr', attr: 'externalId' });
    expect(parseFilter('active eq true')).toEqual({ type: 'cmp', op: 'eq', attr: 'active', value: true });
  });

  it('treats attribute names and operators case-insensitively and accepts the core schema URN', () => {
    expect(parseFilter('USERNAME EQ "x"')).toEqual({ type: 'cmp', op: 'eq', attr: 'userName', value: 'x' });
    expect(parseFilter('urn:ietf:params:scim:schemas:core:2.0:User:userName sw "x"')).toMatchObject({ attr: 'userName', op: 'sw' });
    expect(parseFilter('Emails.Value co "x"')).toMatchObject({ attr: 'emails.value' });
    expect(parseFilter('emails co "x"')).toMatchObject({ attr: 'emails.value' });
    expect(parseFilter('active Eq FALSE')).toMatchObject({ attr: 'active', value: false });
  });

  it('gives and precedence over or', () => {
    expect(parseFilter('userName eq "a" or userName eq "b" and active eq true')).toEqual({
      type: 'or',
      left: { type: 'cmp', op: 'eq', attr: 'userName', value: 'a' },
      right: {
        type: 'and',
        left: { type: 'cmp', op: 'eq', attr: 'userName', value: 'b' },
        right: { type: 'cmp', op: 'eq', attr: 'active', value: true },
      },
    });
    // Parentheses override it.
    expect(parseFilter('(userName eq "a" or userName eq "b") and active eq true')).toMatchObject({ type: 'and', left: { type: 'or' } });
    // Left-associative chains.
    expect(parseFilter('id eq "1" or id eq "2" or id eq "3"')).toMatchObject({ type: 'or', left: { type: 'or' }, right: { value: '3' } });
  });

  it('reads JSON string escapes, quotes and parentheses inside values', () => {
    expect(parseFilter('displayName eq "say \\"hi\\""')).toMatchObject({ value: 'say "hi"' });
    expect(parseFilter('displayName eq "back\\\\slash"')).toMatchObject({ value: 'back\\slash' });
    expect(parseFilter('displayName eq "(not) and or"')).toMatchObject({ value: '(not) and or' });
    expect(parseFilter('displayName eq "caf\\u00e9"')).toMatchObject({ value: 'café' });
    expect(parseFilter('displayName eq ""')).toMatchObject({ value: '' });
  });

  it('parses not(...) and nested groups', () => {
    expect(parseFilter('not (active eq true)')).toEqual({ type: 'not', expr: { type: 'cmp', op: 'eq', attr: 'active', value: true } });
    expect(parseFilter('((userName eq "a"))')).toEqual({ type: 'cmp', op: 'eq', attr: 'userName', value: 'a' });
    expect(parseFilter('userName eq "a"and active eq true'.replace('"a"and', '"a" and'))).toMatchObject({ type: 'and' });
  });

  it('refuses malformed filters with scimType invalidFilter', () => {
    const bad = [
      '',
      '   ',
      'userName',
      'userName eq',
      'userName eq bjensen',
      'userName eq "unterminated',
      'userName eq "bad \\x escape"',
      'userName foo "x"',
      'userName gt "x"',
      'nickName eq "x"',
      // Names Object.prototype has: never an attribute (they used to reach a 500).
      '__proto__ eq "x"',
      'constructor pr',
      'toString eq "x"',
      'hasOwnProperty pr',
      'urn:ietf:params:scim:schemas:core:2.0:User:__proto__ pr',
      'emails[type eq "work"]',
      'emails[type eq "work"].value eq "x"',
      '(userName eq "x"',
      'userName eq "x")',
      'userName eq "x" and',
      'userName eq "x" or or userName eq "y"',
      'and userName eq "x"',
      'not userName eq "x"',
      'active eq "true"',
      'active co true',
      'userName eq true',
      'userName eq 42',
      'userName eq null',
      'userName eq "a" userName eq "b"',
    ];
    for (const filter of bad) expect(rejection(filter).scimType, filter).toBe('invalidFilter');
    expect(rejection('nickName eq "x"').message).toMatch(/nickName/);
  });

  it('bounds length and nesting', () => {
    expect(rejection(`userName eq "${'x'.repeat(FILTER_LENGTH_MAX)}"`).message).toMatch(/longer/);
    const deep = '('.repeat(FILTER_DEPTH_MAX + 1) + 'id eq "1"' + ')'.repeat(FILTER_DEPTH_MAX + 1);
    expect(rejection(deep).message).toMatch(/deeper/);
    const ok = '('.repeat(FILTER_DEPTH_MAX - 1) + 'id eq "1"' + ')'.repeat(FILTER_DEPTH_MAX - 1);
    expect(parseFilter(ok)).toMatchObject({ type: 'cmp' });
  });
});

describe('SCIM filter evaluation', () => {
  it('compares userName, displayName and emails case-insensitively, id and externalId exactly', () => {
    expect(match('userName eq "babs.jensen@example.com"')).toBe(true);
    expect(match('displayName eq "BABS JENSEN"')).toBe(true);
    expect(match('emails.value eq "bj@WORK.example.org"')).toBe(true);
    expect(match('externalId eq "ext-001"')).toBe(true);
    expect(match('externalId eq "EXT-001"')).toBe(false);
    expect(match('id eq "SCIM_1"')).toBe(false);
    expect(match('id eq "scim_1"')).toBe(true);
  });

  it('implements co, sw, ew, ne and pr', () => {
    expect(match('userName co "JENSEN"')).toBe(true);
    expect(match('userName sw "babs."')).toBe(true);
    expect(match('userName sw "jensen"')).toBe(false);
    expect(match('userName ew "@EXAMPLE.COM"')).toBe(true);
    expect(match('userName ne "kim"')).toBe(true);
    expect(match('userName ne "BABS.jensen@example.com"')).toBe(false);
    expect(match('externalId pr')).toBe(true);
    expect(match('externalId pr', kim)).toBe(false);
    expect(match('emails pr', kim)).toBe(false);
    expect(match('displayName pr', kim)).toBe(false);
    expect(match('active pr', kim)).toBe(true);
    // ne on an absent attribute matches; eq/co on one does not.
    expect(match('externalId ne "x"', kim)).toBe(true);
    expect(match('externalId eq "x"', kim)).toBe(false);
    expect(match('externalId co ""', kim)).toBe(false);
  });

  it('matches a multi-valued attribute when any value matches (ne when none equals)', () => {
    expect(match('emails co "work"')).toBe(true);
    expect(match('emails sw "babs@"')).toBe(true);
    expect(match('emails ne "babs@example.com"')).toBe(false);
    expect(match('emails ne "nobody@example.com"')).toBe(true);
  });

  it('combines with and, or, not and parentheses', () => {
    expect(match('active eq false')).toBe(false);
    expect(match('active eq false', kim)).toBe(true);
    expect(match('active ne true', kim)).toBe(true);
    expect(match('userName eq "kim" or userName sw "babs"')).toBe(true);
    expect(match('userName eq "kim" and active eq true')).toBe(false);
    // and binds tighter: true or (false and false) = true.
    expect(match('userName sw "babs" or userName eq "x" and active eq false')).toBe(true);
    // grouped: (true or false) and false = false.
    expect(match('(userName sw "babs" or userName eq "x") and active eq false')).toBe(false);
    expect(match('not (userName eq "kim")')).toBe(true);
    expect(match('not (userName eq "kim")', kim)).toBe(false);
    expect(match('not (not (active eq true))')).toBe(true);
  });
});
