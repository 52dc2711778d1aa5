import { describe, expect, it } from 'vitest';
import { blockedAddressReason, parseIpv6 } from '../../http/webhook-guard.js';

/** The delivery guard's address rule: every refused range, and ordinary public addresses allowed. */
describe('webhook delivery guard: address classification', () => {
  const refused: [string, RegExp][] = [
    ['0.0.0.0', /unspecified/],
    ['0.1.2.3', /unspecified/],
    ['127.0.0.1', /loopback/],
    ['127.255.255.254', /loopback/],
    ['10.0.0.1', /private/],
    ['10.255.255.255', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['100.64.0.1', /CGNAT/],
    ['100.127.255.255', /CGNAT/],
    ['169.254.0.1', /link-local/],
    ['169.254.169.254', /cloud metadata/],
    ['100.100.100.200', /cloud metadata/],
    ['192.0.0.8', /IETF/],
    ['198.18.0.1', /benchmarking/],
    ['224.0.0.1', /multicast/],
    ['239.255.255.250', /multicast/],
    ['240.0.0.1', /reserved/],
    ['255.255.255.255', /broadcast/],
    ['::', /unspecified/],
    ['::1', /loopback/],
    ['[::1]', /loopback/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['febf:ffff::1', /link-local/],
    ['fc00::1', /unique local/],
    ['fd12:3456::1', /unique local/],
    ['fd00:ec2::254', /cloud metadata/],
    ['fec0::1', /site-local/],
    ['ff02::1', /multicast/],
    ['100::1', /discard/],
    ['::ffff:127.0.0.1', /loopback \(IPv4-mapped\)/],
    ['::ffff:7f00:1', /loopback \(IPv4-mapped\)/],
    ['::ffff:169.254.169.254', /cloud metadata \(IPv4-mapped\)/],
    ['::ffff:10.1.2.3', /private \(IPv4-mapped\)/],
    ['::127.0.0.1', /loopback \(IPv4-compatible\)/],
    ['64:ff9b::a9fe:a9fe', /cloud metadata \(NAT64\)/],
    ['2002:7f00:1::', /loopback \(6to4\)/],
    ['not-an-ip', /not an IP/],
    ['1.2.3', /not an IP/],
  ];
  for (const [address, reason] of refused) {
    it(`refuses ${address}`, () => expect(blockedAddressReason(address)).toMatch(reason));
  }

  const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '172.32.0.1', '172.15.255.255', '100.128.0.1', '169.253.255.255', '203.0.113.7', '2606:4700:4700::1111', '2001:db8::1', '::ffff:8.8.8.8', '2002:0808:0808::1'];
  for (const address of allowed) {
    it(`allows ${address}`, () => expect(blockedAddressReason(address)).toBeNull());
  }

  it('parses IPv6 forms', () => {
    expect(parseIpv6('::')).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIpv6('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(parseIpv6('::ffff:1.2.3.4')).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
    expect(parseIpv6('1:2:3:4:5:6:7:8')).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(parseIpv6('1:2:3')).toBeNull();
    expect(parseIpv6('1::2::3')).toBeNull();
  });
});
