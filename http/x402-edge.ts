import type { AppServices } from './services.js';
import { X402_PRICING_KEY, X402_PRICING_KIND, isExemptPath, type PriceRule, type PricingView } from '../actors/x402/messages.js';
import { FacilitatorClient } from './x402-facilitator.js';
import type { X402Settings } from './x402-protocol.js';

/**
 * What the x402 edge of one node keeps: the price rules (a cache of the
 * pricing actor, X402_PRICE_CACHE_MS), the routes the node serves (for the
 * catalog), the facilitator client and the payment settings. Shared by the
 * enforcement plugin (plugins/x402.ts) and the area's routes (routes/x402.ts).
 *
 * The cache: a node may price with rules up to X402_PRICE_CACHE_MS old. A
 * rule written through this node drops its cache at once; `POST
 * /admin/x402/cache/clear` drops it on the node that answers (other nodes of
 * a cluster follow within X402_PRICE_CACHE_MS).
 */
export interface RouteEntry {
  method: string;
  url: string;
  summary: string;
}

export class X402Edge {
  readonly settings: X402Settings;
  readonly facilitator: FacilitatorClient | null;
  /** Every method and path template this node serves, as registered (HEAD and exempt paths left out). */
  readonly routes: RouteEntry[] = [];
  private cached: { rules: PriceRule[]; version: number; fetched_ms: number } | null = null;
  private loading: Promise<PriceRule[]> | null = null;

  constructor(private readonly services: AppServices) {
    const config = services.config;
    this.settings = { payTo: config.x402PayTo, networks: config.x402Networks };
    this.facilitator = config.x402FacilitatorUrl === '' ? null : new FacilitatorClient(config.x402FacilitatorUrl, config.x402FacilitatorTimeoutMs);
  }

  get enabled(): boolean {
    return this.services.config.x402Enabled;
  }

  noteRoute(method: string, url: string, summary: string): void {
    if (method === 'HEAD' || isExemptPath(url)) return;
    this.routes.push({ method, url, summary });
  }

  /** The rules, from the cache while it is fresh, else from the pricing actor (concurrent callers share one ask). */
  async rules(): Promise<PriceRule[]> {
    const now = this.services.clock.now();
    if (this.cached && now - this.cached.fetched_ms < this.services.config.x402PriceCacheMs) return this.cached.rules;
    if (this.loading) return this.loading;
    this.loading = this.services.actors
      .ask<PricingView>(X402_PRICING_KIND, X402_PRICING_KEY, { op: 'list' }, { readOnly: true })
      .then((view) => {
        this.remember(view);
        return view.rules;
      })
      .finally(() => {
        this.loading = null;
      });
    return this.loading;
  }

  /** Keeps a pricing actor's answer (every answer carries the full rule set). */
  remember(view: PricingView): void {
    this.cached = { rules: view.rules, version: view.version, fetched_ms: this.services.clock.now() };
  }

  /** Drops the cache: the next priced request asks the pricing actor. Returns whether there was one. */
  clear(): boolean {
    const had = this.cached !== null;
    this.cached = null;
    return had;
  }
}

const edges = new WeakMap<AppServices, X402Edge>();

/** The node's x402 edge (one per AppServices). */
export function x402Edge(services: AppServices): X402Edge {
  let edge = edges.get(services);
  if (!edge) {
    edge = new X402Edge(services);
    edges.set(services, edge);
  }
  return edge;
}
