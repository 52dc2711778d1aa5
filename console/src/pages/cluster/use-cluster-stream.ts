import { useEffect, useState } from 'preact/hooks';
import type { ApiError } from '../../api.js';
import { followStream } from '../../stream.js';
import type { ClusterView } from './types.js';

export interface ClusterStream {
  view: ClusterView | undefined;
  /** When the last view arrived. */
  updatedAt: Date | undefined;
  connected: boolean;
  error: ApiError | Error | undefined;
}

/** The live cluster view: GET /admin/cluster/stream, followed while the page is shown. */
export function useClusterStream(): ClusterStream {
  const [state, setState] = useState<ClusterStream>({ view: undefined, updatedAt: undefined, connected: false, error: undefined });
  useEffect(() => {
    const abort = new AbortController();
    void followStream(
      '/admin/cluster/stream',
      {
        event(name, data) {
          if (name === 'status') setState((s) => ({ ...s, view: data as ClusterView, updatedAt: new Date(), error: undefined }));
          else if (name === 'error') setState((s) => ({ ...s, error: new Error((data as { message?: string }).message ?? 'The cluster view could not be read.') }));
        },
        state(connected, error) {
          setState((s) => ({ ...s, connected, error: error ?? s.error }));
        },
      },
      abort.signal,
    );
    return () => abort.abort();
  }, []);
  return state;
}
