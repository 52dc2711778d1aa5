import { Resolver } from 'node:dns/promises';

/**
 * DNS lookups for domain verification (docs/api/organizations.md, "Verified
 * domains"): the edge's I/O, outside any actor turn. `services.domainResolver`
 * is mutable, like `services.mail`, so tests (and a deployment with its own
 * resolver) plug in another.
 */
export interface DomainResolver {
  /** The TXT records at `name`, each as its character-strings; [] when there are none or the lookup fails. */
  resolveTxt(name: string): Promise<string[][]>;
}

/** How long one lookup may take before it counts as "nothing found". */
export const DNS_TIMEOUT_MS = 5_000;

/**
 * The system's resolvers (node:dns/promises), one try of at most 5 s. A
 * failed lookup (NXDOMAIN, no data, SERVFAIL, timeout) is "no record": the
 * organization then answers domain_not_verified, naming the record it expects.
 */
export class SystemDomainResolver implements DomainResolver {
  private readonly resolver = new Resolver({ timeout: DNS_TIMEOUT_MS, tries: 1 });

  async resolveTxt(name: string): Promise<string[][]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string[][]>((resolve) => {
      // The query itself is left to end on its own (cancel() would end every query of the resolver).
      timer = setTimeout(() => resolve([]), DNS_TIMEOUT_MS);
      timer.unref();
    });
    try {
      return await Promise.race([this.resolver.resolveTxt(name).catch(() => []), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
