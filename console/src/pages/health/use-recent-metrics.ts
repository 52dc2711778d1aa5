import { useEffect, useState } from 'preact/hooks';
import { api, type ApiError } from '../../api.js';
import type { Sample } from './types.js';

export interface RecentState {
  samples: Sample[];
  intervalMs: number | undefined;
  error: ApiError | Error | undefined;
}

/** Polls GET /admin/metrics/recent with `since` (only new samples) every sample interval; keeps the node's history length. */
export function useRecentMetrics(): RecentState {
  const [state, setState] = useState<RecentState>({ samples: [], intervalMs: undefined, error: undefined });
  useEffect(() => {
    let stopped = false;
    let since = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const poll = async () => {
      let wait = 5_000;
      try {
        const recent = await api<{ interval_ms: number; history_seconds: number; samples: Sample[] }>('GET', `/admin/metrics/recent?since=${since}`);
        if (stopped) return;
        wait = Math.max(500, recent.interval_ms);
        if (recent.samples.length > 0) since = recent.samples[recent.samples.length - 1].at_ms;
        const horizon = Date.now() - recent.history_seconds * 1000;
        setState((s) => ({
          samples: [...s.samples, ...recent.samples].filter((sample) => sample.at_ms >= horizon),
          intervalMs: recent.interval_ms,
          error: undefined,
        }));
      } catch (error) {
        if (stopped) return;
        setState((s) => ({ ...s, error: error instanceof Error ? error : new Error(String(error)) }));
      }
      if (!stopped) timer = setTimeout(poll, wait);
    };
    void poll();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, []);
  return state;
}
