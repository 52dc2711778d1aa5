import { connect } from 'node:net';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../http/plugins/error-handler.js';
import { registerGracefulClose } from '../../http/plugins/graceful-close.js';

/**
 * The drain of a graceful stop, on a real socket: a request already running
 * finishes with 200 and `Connection: close` (so close() completes although
 * the keep-alive client never hung up); a request whose headers complete
 * during the drain gets 503 shutting_down in the error shape.
 */
describe('graceful close', () => {
  it('finishes running requests, refuses new ones with the error shape, and closes keep-alive connections', async () => {
    const app = Fastify({ return503OnClosing: false });
    registerErrorHandling(app);
    registerGracefulClose(app);
    let release!: () => void;
    let started!: () => void;
    const slowStarted = new Promise<void>((resolve) => (started = resolve));
    app.get('/slow', async () => {
      started();
      await new Promise<void>((resolve) => (release = resolve));
      return { ok: true };
    });
    app.get('/fast', async () => ({ ok: true }));
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;

    const open = (): { socket: ReturnType<typeof connect>; text: () => string; closed: Promise<void> } => {
      const socket = connect(port, '127.0.0.1');
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (received += chunk));
      return { socket, text: () => received, closed: new Promise<void>((resolve) => socket.on('close', () => resolve())) };
    };
    // A keep-alive request that is running when the stop begins.
    const running = open();
    running.socket.write('GET /slow HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    await slowStarted;
    // A request whose headers are still arriving when the stop begins.
    const arriving = open();
    arriving.socket.write('GET /fast HTTP/1.1\r\nHost: x\r\n');
    await new Promise((resolve) => setTimeout(resolve, 50));

    const closed = app.close();
    await new Promise((resolve) => setImmediate(resolve));
    arriving.socket.write('Connection: keep-alive\r\n\r\n');
    await arriving.closed;
    release();
    await running.closed;
    await closed;

    const first = running.text();
    expect(first).toMatch(/^HTTP\/1\.1 200 /);
    expect(first).toMatch(/\r\nconnection: close\r\n/i);
    expect(first).toContain('{"ok":true}');
    const refused = arriving.text();
    expect(refused).toMatch(/^HTTP\/1\.1 503 /);
    expect(refused).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(refused).toMatch(/\r\nconnection: close\r\n/i);
    const body = JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4));
    expect(body).toEqual({ statusCode: 503, code: 'shutting_down', error: 'Service Unavailable', message: expect.any(String) });
  });
});
