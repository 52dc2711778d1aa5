import { randomBytes, randomInt } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { USER_KIND } from '../../actors/accounts/messages.js';
import { base32Encode, otpauthUri } from '../../actors/accounts/messages.js';
import { Accounts, normalizeBackupCode, presentedCode } from '../auth/accounts.js';
import { hashSecret } from '../auth/tokens.js';
import { bearerAuthentication, refuseImpersonation, requirePrincipal } from '../plugins/authenticate.js';
import { bearerErrors, bearerSecurity, errorResponses, MessageBody } from '../schemas.js';
import type { AppServices } from '../services.js';

/**
 * TOTP two-factor (spec doc 1 §4.2 and §5.5): setup returns a fresh secret,
 * its otpauth URI and ten backup codes; verify-setup with a code from the
 * authenticator turns it on; disable and backup regeneration need a code.
 */
const BACKUP_CODES = 10;
const BACKUP_ALPHABET = 'abcdefghjkmnpqrstuvwxyz23456789';
const SECRET_BYTES = 20;

const CodeBody = Type.Object({ code: Type.String({ minLength: 1, maxLength: 32 }) });
const TwoFactorSetup = Type.Object({
  secret: Type.String({ description: 'Base32 TOTP secret (SHA-1, 6 digits, 30 s).' }),
  qr_code_uri: Type.String({ description: 'otpauth:// URI to render as a QR code.' }),
  backup_codes: Type.Array(Type.String(), { description: 'Single-use codes, shown only here.' }),
});
const TwoFactorStatus = Type.Object({ enabled: Type.Boolean(), backup_codes_remaining: Type.Integer() });

/** `xxxxx-xxxxx` from an alphabet without look-alike characters. */
function newBackupCode(): string {
  let code = '';
  for (let i = 0; i < 10; i++) code += BACKUP_ALPHABET[randomInt(BACKUP_ALPHABET.length)];
  return `${code.slice(0, 5)}-${code.slice(5)}`;
}

function newBackupCodes(): { codes: string[]; hashes: string[] } {
  const codes = Array.from({ length: BACKUP_CODES }, newBackupCode);
  return { codes, hashes: codes.map((code) => hashSecret(normalizeBackupCode(code))) };
}

export function twoFactorRoutes(app: FastifyInstance, services: AppServices): void {
  const authenticate = bearerAuthentication(services);
  const ask = <T>(user_id: string, message: unknown) => services.actors.ask<T>(USER_KIND, user_id, message);
  const accounts = new Accounts(services);

  app.post('/api/v1/auth/2fa/totp/setup', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Start TOTP set-up: a new secret, its QR code URI and backup codes. Already enabled: 409.',
      security: bearerSecurity,
      response: { 200: TwoFactorSetup, ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    refuseImpersonation(request);
    const principal = requirePrincipal(request);
    const secret = base32Encode(randomBytes(SECRET_BYTES));
    const backup = newBackupCodes();
    const { email } = await ask<{ email: string }>(principal.user_id, { op: '2fa-setup', secret_b32: secret, backup_hashes: backup.hashes });
    return { secret, qr_code_uri: otpauthUri(secret, email, services.config.issuer), backup_codes: backup.codes };
  });

  app.post<{ Body: Static<typeof CodeBody> }>('/api/v1/auth/2fa/totp/verify-setup', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Turn two-factor on with a current code for the secret from setup.',
      security: bearerSecurity,
      body: CodeBody,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 409) },
    },
  }, async (request) => {
    refuseImpersonation(request);
    await ask(requirePrincipal(request).user_id, { op: '2fa-verify-setup', code: request.body.code.trim() });
    return { message: 'Two-factor authentication enabled.' };
  });

  app.get('/api/v1/auth/2fa/status', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Whether two-factor is on, and how many backup codes are left.',
      security: bearerSecurity,
      response: { 200: TwoFactorStatus, ...errorResponses(...bearerErrors) },
    },
  }, async (request) => ask(requirePrincipal(request).user_id, { op: '2fa-status' }));

  app.post<{ Body: Static<typeof CodeBody> }>('/api/v1/auth/2fa/totp/disable', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Turn two-factor off. Needs a current TOTP code or a backup code. Wrong codes count towards the second-step throttle (429).',
      security: bearerSecurity,
      body: CodeBody,
      response: { 200: MessageBody, ...errorResponses(...bearerErrors, 403, 409, 429) },
    },
  }, async (request) => {
    const user_id = refuseImpersonation(request).user_id;
    // Judged by the user actor inside a login flow, under the second-step throttle.
    await accounts.checkCode(user_id, request.ip, { op: '2fa-disable', presented: presentedCode(request.body.code) });
    return { message: 'Two-factor authentication disabled.' };
  });

  app.post<{ Body: Static<typeof CodeBody> }>('/api/v1/auth/2fa/backup/regenerate', {
    onRequest: authenticate,
    schema: {
      tags: ['auth'],
      summary: 'Replace every backup code. Needs a current TOTP code. Wrong codes count towards the second-step throttle (429).',
      security: bearerSecurity,
      body: CodeBody,
      response: { 200: Type.Object({ backup_codes: Type.Array(Type.String()) }), ...errorResponses(...bearerErrors, 403, 409, 429) },
    },
  }, async (request) => {
    refuseImpersonation(request);
    const backup = newBackupCodes();
    const user_id = requirePrincipal(request).user_id;
    await accounts.checkCode(user_id, request.ip, { op: '2fa-regenerate', presented: presentedCode(request.body.code), backup_hashes: backup.hashes });
    return { backup_codes: backup.codes };
  });
}
