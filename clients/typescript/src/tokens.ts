/**
 * Where the client keeps the session's tokens. The client reads them before
 * every request and writes them after a sign-in and after every refresh (the
 * refresh token rotates: the old one stops working). Plug in storage of your
 * own (localStorage, a keychain, a database row) with two callbacks.
 */
export interface Tokens {
  access_token: string;
  refresh_token?: string | null;
}

export interface TokenStore {
  get(): Tokens | null | Promise<Tokens | null>;
  /** Called with the new tokens, or with null when the session ended (refresh refused). */
  set(tokens: Tokens | null): void | Promise<void>;
}

/** Tokens in memory only (the default): lost when the process or page goes. */
export function memoryTokenStore(initial: Tokens | null = null): TokenStore {
  let current = initial;
  return {
    get: () => current,
    set: (tokens) => {
      current = tokens;
    },
  };
}
