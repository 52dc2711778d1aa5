import { describe, expect, it } from 'vitest';
import { base32Decode, base32Encode, hotp, matchTotp, otpauthUri, totp, totpStep } from '../../actors/accounts/totp.js';

// RFC 6238 Appendix B: seeds are the ASCII strings below, 8 digits, 30 s steps.
const seeds = {
  sha1: Buffer.from('12345678901234567890'),
  sha256: Buffer.from('12345678901234567890123456789012'),
  sha512: Buffer.from('1234567890123456789012345678901234567890123456789012345678901234'),
};
const vectors: [number, string, keyof typeof seeds][] = [
  [59, '94287082', 'sha1'],
  [59, '46119246', 'sha256'],
  [59, '90693936', 'sha512'],
  [1111111109, '07081804', 'sha1'],
  [1111111109, '68084774', 'sha256'],
  [1111111109, '25091201', 'sha512'],
  [1111111111, '14050471', 'sha1'],
  [1111111111, '67062674', 'sha256'],
  [1111111111, '99943326', 'sha512'],
  [1234567890, '89005924', 'sha1'],
  [1234567890, '91819424', 'sha256'],
  [1234567890, '93441116', 'sha512'],
  [2000000000, '69279037', 'sha1'],
  [2000000000, '90698825', 'sha256'],
  [2000000000, '38618901', 'sha512'],
  [20000000000, '65353130', 'sha1'],
  [20000000000, '77737706', 'sha256'],
  [20000000000, '47863826', 'sha512'],
];

describe('TOTP (RFC 6238)', () => {
  it.each(vectors)('at %i s gives %s with %s', (seconds, expected, algorithm) => {
    expect(totp(seeds[algorithm], seconds * 1000, { algorithm, digits: 8 })).toBe(expected);
  });

  it('HOTP matches RFC 4226 Appendix D', () => {
    const expected = ['755224', '287082', '359152', '969429', '338314', '254676', '287922', '162583', '399871', '520489'];
    expect(expected.map((_, counter) => hotp(seeds.sha1, counter))).toEqual(expected);
  });

  it('accepts a code one step early or late, not two', () => {
    const now = 1_700_000_000_000;
    const step = totpStep(now);
    expect(matchTotp(seeds.sha1, totp(seeds.sha1, now), now)).toBe(step);
    expect(matchTotp(seeds.sha1, totp(seeds.sha1, now - 30_000), now)).toBe(step - 1);
    expect(matchTotp(seeds.sha1, totp(seeds.sha1, now + 30_000), now)).toBe(step + 1);
    expect(matchTotp(seeds.sha1, totp(seeds.sha1, now - 60_000), now)).toBeNull();
    expect(matchTotp(seeds.sha1, 'abcdef', now)).toBeNull();
    expect(matchTotp(seeds.sha1, '1234567', now)).toBeNull();
  });

  it('round-trips base32 and refuses non-base32', () => {
    const bytes = Buffer.from([0, 1, 2, 250, 251, 252, 253, 254, 255, 17]);
    expect(base32Decode(base32Encode(bytes))).toEqual(bytes);
    expect(base32Encode(Buffer.from('foobar'))).toBe('MZXW6YTBOI');
    expect(base32Decode('mzxw 6ytb oi==')?.toString()).toBe('foobar');
    expect(base32Decode('not base32!')).toBeNull();
  });

  it('builds an otpauth URI authenticator apps read', () => {
    const uri = otpauthUri('MZXW6YTBOI', 'ada@example.com', 'Platform');
    expect(uri).toBe('otpauth://totp/Platform%3Aada%40example.com?secret=MZXW6YTBOI&issuer=Platform&algorithm=SHA1&digits=6&period=30');
  });
});
