import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signJob } from '../../http/job-delivery.js';

/** A job delivery's signature is the Standard Webhooks scheme with the job's secret (conventions, "Signed deliveries"). */
describe('job signing', () => {
  it('verifies with the standardwebhooks library, and fails with another secret or a changed body', () => {
    const secret = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
    const body = JSON.stringify({ job_id: 'job_cQ.abc', queue: 'q', attempt: 2, payload: { n: 1 } });
    const timestamp_s = Math.floor(Date.now() / 1000);
    const signature = signJob(secret, 'job_cQ.abc', timestamp_s, body);
    expect(signature).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const headers = { 'webhook-id': 'job_cQ.abc', 'webhook-timestamp': String(timestamp_s), 'webhook-signature': signature };
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 4).toString('base64')}`).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body.replace('2', '3'), headers)).toThrow();
  });
});
