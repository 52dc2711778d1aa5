/**
 * Verified e-mail domains of an organization: the pure rules (re-exported by
 * name from messages.ts, so other layers import them from there).
 *
 * An organization proves it controls a domain by publishing a DNS TXT record
 * `_platform-verification.<domain>` whose value is
 * `platform-verification=<token>`; the edge looks the record up and the
 * organization actor compares (see docs/api/organizations.md, "Verified
 * domains").
 */

/** Domains one organization may hold, pending or verified. */
export const ORG_DOMAINS_MAX = 20;
/** RFC 1035 §2.3.4: a name is at most 255 octets on the wire, 253 characters as text. */
export const DOMAIN_LENGTH_MAX = 253;
/** RFC 1035 §2.3.4: a label is at most 63 octets. */
export const DOMAIN_LABEL_LENGTH_MAX = 63;
/** The label the TXT record is published under. */
export const DOMAIN_VERIFICATION_LABEL = '_platform-verification';
/** The prefix of the TXT record's value. */
export const DOMAIN_VERIFICATION_PREFIX = 'platform-verification=';

/** Letters, digits and inner hyphens, 1 to 63 characters (RFC 1035 §2.3.1, with RFC 1123 §2.1's leading digit). */
const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type DomainCheck = { ok: true; domain: string } | { ok: false; reason: string };

/**
 * A domain as an organization may claim it: lower-cased; ASCII only (an IDN
 * in its punycode form, `xn--...`); labels of letters, digits and inner
 * hyphens, 1 to 63 characters; at least two labels; at most 253 characters;
 * no trailing dot; not an IP address (the last label is not all digits, and
 * `:` is never allowed).
 */
export function parseDomain(input: string): DomainCheck {
  const domain = input.toLowerCase();
  if (domain.length === 0) return { ok: false, reason: 'The domain is empty.' };
  if (domain.length > DOMAIN_LENGTH_MAX) return { ok: false, reason: `A domain has at most ${DOMAIN_LENGTH_MAX} characters.` };
  if (/[^\x00-\x7f]/.test(domain)) return { ok: false, reason: 'Give an internationalized domain in its ASCII (punycode, xn--...) form.' };
  if (domain.endsWith('.')) return { ok: false, reason: 'A domain has no trailing dot.' };
  const labels = domain.split('.');
  if (labels.length < 2) return { ok: false, reason: 'A domain has at least two labels (example.com).' };
  for (const label of labels) {
    if (!LABEL.test(label)) {
      return { ok: false, reason: `"${label.slice(0, DOMAIN_LABEL_LENGTH_MAX + 1)}" is not a DNS label: 1 to ${DOMAIN_LABEL_LENGTH_MAX} letters, digits and inner hyphens.` };
    }
  }
  if (/^[0-9]+$/.test(labels[labels.length - 1])) return { ok: false, reason: 'An IP address is not a domain.' };
  return { ok: true, domain };
}

/** The name of the TXT record that proves control of `domain`. */
export function verificationRecordName(domain: string): string {
  return `${DOMAIN_VERIFICATION_LABEL}.${domain}`;
}

/** The value the TXT record must hold for `token`. */
export function verificationRecordValue(token: string): string {
  return `${DOMAIN_VERIFICATION_PREFIX}${token}`;
}

/**
 * Whether the TXT records seen hold `expected`: each record's strings are
 * joined (a long value is split into 255-octet strings, RFC 7208 §3.3), and
 * one of them, trimmed, equals it exactly.
 */
export function txtHolds(records: readonly (readonly string[])[], expected: string): boolean {
  return records.some((strings) => strings.join('').trim() === expected);
}

/**
 * The domain of an e-mail address, lower-cased: what follows its last `@`
 * (null when there is none, or nothing follows it). The domain is not
 * validated; compare it with an organization's verified domains, which are
 * exact (a subdomain is not covered by its parent).
 */
export function emailDomain(email: string): string | null {
  const at = email.lastIndexOf('@');
  if (at < 0) return null;
  const domain = email.slice(at + 1).trim().toLowerCase();
  return domain.length > 0 ? domain : null;
}
