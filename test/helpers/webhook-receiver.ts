import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A local webhook target: records every POST and answers with what the test programs per path. */
export interface ReceivedDelivery {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  json: any;
}

export interface Receiver {
  url: string;
  port: number;
  received: ReceivedDelivery[];
  /** Status per path (default 200); 'hang' never answers; a function decides per request. */
  respond: Map<string, number | 'hang' | ((delivery: ReceivedDelivery) => { status: number; headers?: Record<string, string> } | 'hang')>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedDelivery[] = [];
  const respond: Receiver['respond'] = new Map();
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const path = request.url ?? '/';
      const delivery = { path, headers: request.headers, body, json };
      received.push(delivery);
      const rule = respond.get(path) ?? 200;
      const answer = typeof rule === 'function' ? rule(delivery) : rule === 'hang' ? rule : { status: rule };
      if (answer === 'hang') return;
      response.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
      response.end(answer.status >= 400 ? `failed with ${answer.status}` : 'ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    respond,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
