import { useEffect, useState } from 'preact/hooks';
import { navigate, useRoute } from '../route.js';
import { LivenessSection } from './coordination/liveness.js';
import { LocksSection } from './coordination/locks.js';
import { PresenceSection } from './coordination/presence.js';
import { WaitingRoomsSection } from './coordination/waiting-rooms.js';

/**
 * #/coordination/<tenant>: one tenant's locks, waiting rooms, presence contexts and liveness
 * entities. Coordination state belongs to a tenant (the organization of the credential, else
 * the user), so the page asks for one: a user id or an organization id (the Users and
 * Organizations pages link here).
 */
export function CoordinationPage() {
  const route = useRoute();
  const tenant = route.startsWith('/coordination/') ? decodeURIComponent(route.slice('/coordination/'.length)) : '';
  const [draft, setDraft] = useState(tenant);
  useEffect(() => setDraft(tenant), [tenant]);

  function choose(event: Event) {
    event.preventDefault();
    const chosen = draft.trim();
    if (chosen) navigate(`/coordination/${encodeURIComponent(chosen)}`);
  }

  return (
    <section>
      <h1>Coordination</h1>
      <form class="filters" onSubmit={choose}>
        <label>
          Tenant (user or organization id)
          <input name="tenant" required maxLength={128} value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
        </label>
        <button type="submit">Show</button>
      </form>
      {tenant ? (
        <>
          <p>
            Tenant <code>{tenant}</code>
          </p>
          <LocksSection tenant={tenant} />
          <WaitingRoomsSection tenant={tenant} />
          <PresenceSection tenant={tenant} />
          <LivenessSection tenant={tenant} />
        </>
      ) : (
        <p>Enter a tenant, or open one from a user's or an organization's page.</p>
      )}
    </section>
  );
}
