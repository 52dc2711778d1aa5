import type { FastifyRequest } from 'fastify';

/**
 * The base URL the node puts in what it hands out: the OAuth issuer and
 * endpoints, SCIM resource locations, the CLI login's verification_uri, and
 * the links it mails (e-mail verification, invitations).
 *
 * PUBLIC_BASE_URL when set; otherwise the node's own address (its listen or
 * advertised URL), never the request's Host header: a Host chosen by a
 * client would otherwise become the issuer of tokens, or the link in a mail
 * sent to someone else (host-header injection). The node warns at start when
 * PUBLIC_BASE_URL is unset.
 */
declare module 'fastify' {
  interface FastifyInstance {
    publicBaseUrl(): string;
  }
}

export function publicBase(request: FastifyRequest): string {
  return request.server.publicBaseUrl();
}
