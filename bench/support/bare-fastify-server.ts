import Fastify from 'fastify';

/**
 * The reference for the HTTP benchmark: the same Fastify version as the
 * service, no plugins, no schemas, no logger. POST /echo parses a small JSON
 * body and sends it back; GET / returns a constant. Listens on env PORT.
 */
const app = Fastify({ logger: false });

app.post('/echo', async (request) => request.body);
app.get('/', async () => ({ hello: 'world' }));

const port = Number(process.env.PORT ?? 0);
await app.listen({ host: '127.0.0.1', port });

const stop = () => {
  app.close().then(() => process.exit(0), () => process.exit(1));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
