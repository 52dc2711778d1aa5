/**
 * The x402 protocol's shapes (Coinbase's x402, versions 1 and 2), built from
 * this node's settings: the payment requirements a priced route accepts, the
 * 402 body, and the payment proof a client sends back. Pure functions, no I/O.
 *
 * v1: the 402 body is `{x402Version: 1, error, accepts: [PaymentRequirements]}`
 * with `maxAmountRequired`, `resource`, `description`, `mimeType`, `payTo`,
 * `maxTimeoutSeconds`, `asset`, `outputSchema`, `extra`; the client pays in an
 * `X-PAYMENT` header (base64 of a PaymentPayload `{x402Version, scheme,
 * network, payload}`); the server answers `X-PAYMENT-RESPONSE`.
 * v2: the same requirements with `amount` and a CAIP-2 `network`, the
 * resource described once beside them; the server sends them base64-encoded
 * in a `PAYMENT-REQUIRED` header, the client pays in `PAYMENT-SIGNATURE`
 * (a PaymentPayload `{x402Version: 2, accepted, payload}`) and gets `PAYMENT-RESPONSE`.
 */

export interface NetworkInfo {
  /** CAIP-2 id for x402 v2. */
  caip2: string;
  /** The USDC contract on that network. */
  asset: string;
  mainnet: boolean;
}

/** Networks this node knows the USDC contract of (EIP-3009 `exact` scheme). */
export const KNOWN_NETWORKS: Record<string, NetworkInfo> = {
  base: { caip2: 'eip155:8453', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', mainnet: true },
  'base-sepolia': { caip2: 'eip155:84532', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', mainnet: false },
};

export const X402_SCHEME = 'exact';
/** How long a payment authorization may take to settle. */
export const MAX_TIMEOUT_SECONDS = 60;
/** EIP-712 domain of the USDC contract, which the client signs against. */
const USDC_EXTRA = { name: 'USDC', version: '2' };

export interface X402Settings {
  payTo: string;
  networks: string[];
}

export interface PricedResource {
  amount_atomic: number;
  /** Absolute URL of the resource. */
  resource: string;
  description: string;
  method: string;
  discoverable: boolean;
}

export interface PaymentRequirementsV1 {
  scheme: string;
  network: string;
  maxAmountRequired: string;
  resource: string;
  description: string;
  mimeType: string;
  payTo: string;
  maxTimeoutSeconds: number;
  asset: string;
  outputSchema: { input: { type: 'http'; method: string; discoverable: boolean } };
  extra: { name: string; version: string };
}

export interface PaymentRequirementsV2 {
  scheme: string;
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { name: string; version: string };
}

export function requirementsV1(settings: X402Settings, priced: PricedResource): PaymentRequirementsV1[] {
  return settings.networks.map((network) => ({
    scheme: X402_SCHEME,
    network,
    maxAmountRequired: String(priced.amount_atomic),
    resource: priced.resource,
    description: priced.description,
    mimeType: 'application/json',
    payTo: settings.payTo,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    asset: KNOWN_NETWORKS[network]?.asset ?? '',
    outputSchema: { input: { type: 'http', method: priced.method, discoverable: priced.discoverable } },
    extra: USDC_EXTRA,
  }));
}

export function requirementsV2(settings: X402Settings, priced: PricedResource): PaymentRequirementsV2[] {
  return settings.networks.map((network) => ({
    scheme: X402_SCHEME,
    network: KNOWN_NETWORKS[network]?.caip2 ?? network,
    amount: String(priced.amount_atomic),
    asset: KNOWN_NETWORKS[network]?.asset ?? '',
    payTo: settings.payTo,
    maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
    extra: USDC_EXTRA,
  }));
}

/**
 * The 402 body: the x402 v1 fields (`x402Version`, `error`, `accepts`) with
 * the conventions' error fields beside them (`statusCode`, `code`, `message`),
 * so both an x402 client and a client of the error shape read it.
 */
export function paymentRequiredBody(error: string, accepts: PaymentRequirementsV1[]) {
  return { x402Version: 1, error, accepts, statusCode: 402, code: 'payment_required', message: error };
}

/** The v2 PaymentRequired object, base64 for the PAYMENT-REQUIRED header. */
export function paymentRequiredHeaderV2(error: string, priced: PricedResource, accepts: PaymentRequirementsV2[]): string {
  const body = { x402Version: 2, error, resource: { url: priced.resource, description: priced.description, mimeType: 'application/json' }, accepts };
  return Buffer.from(JSON.stringify(body)).toString('base64');
}

/** A decoded payment proof: the payload as sent (handed to the facilitator unchanged) and what selects its requirement. */
export interface PaymentProof {
  version: 1 | 2;
  payload: Record<string, unknown>;
  scheme: string;
  network: string;
}

/** Headers larger than this are not a payment proof (an EIP-3009 proof is under 1 KiB). */
const PROOF_LENGTH_MAX = 8_192;

/** X-PAYMENT (v1) or PAYMENT-SIGNATURE (v2): base64 of a JSON PaymentPayload; null when malformed. */
export function decodePaymentProof(header: string): PaymentProof | null {
  if (header.length === 0 || header.length > PROOF_LENGTH_MAX || !/^[A-Za-z0-9+/=_-]+$/.test(header)) return null;
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(header, 'base64').toString('utf8'));
  } catch {
    return null;
  }
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return null;
  const record = payload as Record<string, unknown>;
  if (record.x402Version === 1 && typeof record.scheme === 'string' && typeof record.network === 'string') {
    return { version: 1, payload: record, scheme: record.scheme, network: record.network };
  }
  const accepted = record.accepted as Record<string, unknown> | undefined;
  if (record.x402Version === 2 && typeof accepted === 'object' && accepted !== null && typeof accepted.scheme === 'string' && typeof accepted.network === 'string') {
    return { version: 2, payload: record, scheme: accepted.scheme, network: accepted.network };
  }
  return null;
}

/** The requirement of `accepts` the proof pays (same scheme and network), or null. */
export function matchingRequirement<T extends { scheme: string; network: string }>(proof: PaymentProof, accepts: T[]): T | null {
  return accepts.find((requirement) => requirement.scheme === proof.scheme && requirement.network === proof.network) ?? null;
}

/** The v1 network name of a requirement's network (v2 requirements name CAIP-2 ids). */
export function v1NetworkName(network: string): string {
  for (const [name, info] of Object.entries(KNOWN_NETWORKS)) if (info.caip2 === network) return name;
  return network;
}

/** The settlement answer for X-PAYMENT-RESPONSE / PAYMENT-RESPONSE: base64 JSON. */
export function paymentResponseHeader(settlement: { success: boolean; transaction: string; network: string; payer: string }): string {
  return Buffer.from(JSON.stringify(settlement)).toString('base64');
}
