import type { Logger } from 'pino';

/**
 * Outgoing mail. The node's default transport writes each message to the log
 * (component `mail`), which is how a developer follows a verification link
 * locally; a deployment plugs in an SMTP or API transport by assigning another
 * MailTransport to `services.mail`, and tests assign a capturing one.
 */
export interface MailMessage {
  to: string;
  subject: string;
  text: string;
  /** The link the message carries, when it has one (also inside `text`). */
  link?: string;
}

export interface MailTransport {
  send(message: MailMessage): Promise<void>;
}

export class LogMailTransport implements MailTransport {
  constructor(private readonly logger: Logger) {}

  async send(message: MailMessage): Promise<void> {
    // The link is the point of this transport in development; it is logged at
    // info on purpose. Production replaces this transport.
    this.logger.info({ to: message.to, subject: message.subject, link: message.link }, 'mail (log transport)');
  }
}

/** Keeps every message in memory (tests, and local tooling). */
export class CapturingMailTransport implements MailTransport {
  readonly sent: MailMessage[] = [];

  async send(message: MailMessage): Promise<void> {
    this.sent.push(message);
  }
}
