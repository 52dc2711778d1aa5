import { isIP } from 'node:net';

/**
 * The delivery guard's address rule, a pure function: which addresses a
 * webhook delivery may not connect to (spec doc 1 §8, "delivery URL guard").
 * The delivery worker resolves a target once, checks every address with
 * this, and connects to the checked address (never resolving again), on
 * every redirect hop.
 *
 * Refused: unspecified, loopback, private (RFC 1918), shared/CGNAT
 * (100.64.0.0/10), link-local (169.254.0.0/16, fe80::/10), unique local
 * (fc00::/7), site-local (fec0::/10), multicast, reserved and broadcast,
 * benchmarking (198.18.0.0/15), IETF protocol assignments (192.0.0.0/24),
 * the discard prefix 100::/64, and the cloud metadata addresses
 * (169.254.169.254, fd00:ec2::254, 100.100.100.200), also when written as
 * IPv4-mapped, IPv4-compatible, NAT64 (64:ff9b::/96) or 6to4 (2002::/16)
 * IPv6 addresses.
 */

/** Why `address` is refused, or null when it may be reached. A string that is no IP address is refused. */
export function blockedAddressReason(address: string): string | null {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const unzoned = bare.split('%')[0];
  const family = isIP(unzoned);
  if (family === 4) return blockedIpv4(ipv4ToNumber(unzoned));
  if (family === 6) {
    const groups = parseIpv6(unzoned);
    if (!groups) return 'not an IP address';
    return blockedIpv6(groups);
  }
  return 'not an IP address';
}

function ipv4ToNumber(address: string): number {
  return address.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

function inV4(n: number, base: string, bits: number): boolean {
  const size = 2 ** (32 - bits);
  const start = ipv4ToNumber(base);
  return n >= start && n < start + size;
}

function blockedIpv4(n: number): string | null {
  if (n === ipv4ToNumber('169.254.169.254')) return 'cloud metadata';
  if (n === ipv4ToNumber('100.100.100.200')) return 'cloud metadata';
  if (inV4(n, '0.0.0.0', 8)) return 'unspecified';
  if (inV4(n, '127.0.0.0', 8)) return 'loopback';
  if (inV4(n, '10.0.0.0', 8) || inV4(n, '172.16.0.0', 12) || inV4(n, '192.168.0.0', 16)) return 'private';
  if (inV4(n, '100.64.0.0', 10)) return 'shared address space (CGNAT)';
  if (inV4(n, '169.254.0.0', 16)) return 'link-local';
  if (inV4(n, '192.0.0.0', 24)) return 'IETF protocol assignments';
  if (inV4(n, '198.18.0.0', 15)) return 'benchmarking';
  if (inV4(n, '224.0.0.0', 4)) return 'multicast';
  if (n === 0xffffffff) return 'broadcast';
  if (inV4(n, '240.0.0.0', 4)) return 'reserved';
  return null;
}

/** Eight 16-bit groups, or null. Accepts `::` and a trailing dotted quad. */
export function parseIpv6(address: string): number[] | null {
  let text = address.toLowerCase();
  const tail: number[] = [];
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    if (isIP(dotted[1]) !== 4) return null;
    const n = ipv4ToNumber(dotted[1]);
    tail.push(Math.floor(n / 65536), n % 65536);
    text = text.slice(0, -dotted[1].length);
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => (/^[0-9a-f]{1,4}$/.test(g) ? parseInt(g, 16) : NaN)));
  const head = parse(halves[0]);
  const rest = halves.length === 2 ? parse(halves[1]) : [];
  const known = head.length + rest.length + tail.length;
  if ([...head, ...rest].some(Number.isNaN)) return null;
  if (halves.length === 1 && known !== 8) return null;
  if (known > 8) return null;
  const zeros = new Array(8 - known).fill(0);
  return [...head, ...zeros, ...rest, ...tail];
}

function embeddedV4(high: number, low: number): number {
  return high * 65536 + low;
}

function blockedIpv6(g: number[]): string | null {
  const allZeroUntil = (index: number) => g.slice(0, index).every((x) => x === 0);
  if (allZeroUntil(8)) return 'unspecified';
  if (allZeroUntil(7) && g[7] === 1) return 'loopback';
  // IPv4-mapped ::ffff:a.b.c.d and IPv4-compatible ::a.b.c.d: the IPv4 rule decides.
  if (allZeroUntil(5) && g[5] === 0xffff) return prefixed('IPv4-mapped', blockedIpv4(embeddedV4(g[6], g[7])));
  if (allZeroUntil(6)) return prefixed('IPv4-compatible', blockedIpv4(embeddedV4(g[6], g[7])));
  // NAT64 64:ff9b::/96 and 6to4 2002::/16 carry an IPv4 address too.
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return prefixed('NAT64', blockedIpv4(embeddedV4(g[6], g[7])));
  if (g[0] === 0x2002) return prefixed('6to4', blockedIpv4(embeddedV4(g[1], g[2])));
  if (g[0] === 0xfd00 && g[1] === 0x0ec2 && g.slice(2, 7).every((x) => x === 0) && g[7] === 0x254) return 'cloud metadata';
  if ((g[0] & 0xfe00) === 0xfc00) return 'unique local';
  if ((g[0] & 0xffc0) === 0xfe80) return 'link-local';
  if ((g[0] & 0xffc0) === 0xfec0) return 'site-local';
  if ((g[0] & 0xff00) === 0xff00) return 'multicast';
  if (g[0] === 0x0100 && g.slice(1, 4).every((x) => x === 0)) return 'discard prefix';
  return null;
}

function prefixed(form: string, reason: string | null): string | null {
  return reason === null ? null : `${reason} (${form})`;
}
