import { ServiceError } from '../runtime/index.js';

/**
 * The x402 facilitator over HTTP (X402_FACILITATOR_URL): `POST /verify` and
 * `POST /settle`, each with `{x402Version, paymentPayload,
 * paymentRequirements}`. Verify answers `{isValid, invalidReason?, payer?}`;
 * settle answers `{success, errorReason?, transaction, network, payer?}`.
 * A facilitator that does not answer, times out or answers something else
 * is a 503 `x402_facilitator_unavailable` (nothing was charged), never a 5xx
 * defect and never a payment.
 */
export interface VerifyAnswer {
  isValid: boolean;
  invalidReason: string | null;
  payer: string | null;
}

export interface SettleAnswer {
  success: boolean;
  errorReason: string | null;
  transaction: string;
  network: string;
  payer: string | null;
}

/** Answers larger than this are not a facilitator's. */
const ANSWER_BYTES_MAX = 64 * 1024;

export class FacilitatorClient {
  constructor(
    readonly url: string,
    private readonly timeoutMs: number,
  ) {}

  async verify(version: number, paymentPayload: unknown, paymentRequirements: unknown): Promise<VerifyAnswer> {
    const answer = await this.post('verify', { x402Version: version, paymentPayload, paymentRequirements });
    if (typeof answer.isValid !== 'boolean') throw unavailable('verify answered without isValid');
    return {
      isValid: answer.isValid,
      invalidReason: typeof answer.invalidReason === 'string' ? answer.invalidReason : null,
      payer: typeof answer.payer === 'string' ? answer.payer : null,
    };
  }

  async settle(version: number, paymentPayload: unknown, paymentRequirements: unknown): Promise<SettleAnswer> {
    const answer = await this.post('settle', { x402Version: version, paymentPayload, paymentRequirements });
    if (typeof answer.success !== 'boolean') throw unavailable('settle answered without success');
    return {
      success: answer.success,
      errorReason: typeof answer.errorReason === 'string' ? answer.errorReason : null,
      transaction: typeof answer.transaction === 'string' ? answer.transaction : '',
      network: typeof answer.network === 'string' ? answer.network : '',
      payer: typeof answer.payer === 'string' ? answer.payer : null,
    };
  }

  /** For the preflight: does `GET /supported` answer 2xx within the time-out? */
  async reachable(): Promise<{ ok: boolean; detail: string }> {
    try {
      const response = await fetch(`${this.url}/supported`, { signal: AbortSignal.timeout(Math.min(this.timeoutMs, 3_000)), redirect: 'error' });
      await response.arrayBuffer();
      return response.ok ? { ok: true, detail: `${this.url}/supported answered ${response.status}` } : { ok: false, detail: `${this.url}/supported answered ${response.status}` };
    } catch (error) {
      return { ok: false, detail: `${this.url}/supported did not answer: ${(error as Error).message}` };
    }
  }

  private async post(operation: 'verify' | 'settle', body: unknown): Promise<Record<string, unknown>> {
    let response: Response;
    let text: string;
    try {
      response = await fetch(`${this.url}/${operation}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: 'error',
      });
      text = await response.text();
    } catch (error) {
      throw unavailable(`${operation} failed: ${(error as Error).message}`);
    }
    // A facilitator answers a refused payment with 200 {isValid: false} or, for some, 400 with the same body.
    if (response.status >= 500 || text.length > ANSWER_BYTES_MAX) throw unavailable(`${operation} answered HTTP ${response.status}`);
    try {
      const parsed = JSON.parse(text) as unknown;
      if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    } catch {
      // fall through
    }
    throw unavailable(`${operation} answered HTTP ${response.status} without a JSON object`);
  }
}

function unavailable(detail: string): ServiceError {
  return new ServiceError('x402_facilitator_unavailable', `The x402 facilitator could not be used: ${detail}.`, { retryAfterSeconds: 5 });
}
