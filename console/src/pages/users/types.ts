/** The shapes the admin user routes answer with (docs/api/admin.md). */
export interface User {
  id: string;
  email: string;
  username: string;
  display_name: string;
  role: string;
  email_verified: boolean;
  two_factor_enabled: boolean;
  banned: boolean;
  created_at: string;
}

export interface UserDetail {
  user: User;
  active_session_count: number;
  api_key_count: number;
  passkey_count: number;
  identities: { id: string; provider: string; provider_display_name: string; provider_email: string; linked_at: string }[];
  org_memberships: { org_id: string; org_name: string; role: string }[];
  ban: null | { reason: string; banned_at: string; banned_by: string };
}

export interface Session {
  id: string;
  user_id: string;
  active: boolean;
  created_at: string;
  expires_at: string;
  ip_address: string;
  user_agent: string;
  impersonated_by: string | null;
}

export type Impersonation =
  | { requires_2fa: false; user: User; access_token: string; refresh_token: string; token_type: 'Bearer'; expires_in: number }
  | { requires_2fa: true; two_factor_token: string; user: User };
