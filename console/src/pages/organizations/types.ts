/** The shapes the admin organization routes answer with (docs/api/organizations.md). */
export interface Organization {
  org_id: string;
  name: string;
  slug: string;
  created_by: string;
  created_at: string;
  updated_at: string;
  logo_url: string | null;
  metadata: Record<string, unknown>;
  member_count: number;
  sso_enforced: boolean;
  sso_exempt_user_ids: string[];
}

export interface Member {
  user_id: string;
  role: string;
  joined_at: string;
  user: { email: string; username: string; display_name: string } | null;
}
