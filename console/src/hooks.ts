import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export interface Loaded<T> {
  data: T | undefined;
  error: ApiError | Error | undefined;
  reload: () => void;
}

/**
 * Loads `load()` now, whenever `deps` change and, with `everyMs`, on an interval (a page's
 * live counts). Answers that arrive after a newer request started are dropped.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = [], everyMs?: number): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<ApiError | Error | undefined>(undefined);
  const generation = useRef(0);
  const run = () => {
    const mine = ++generation.current;
    load().then(
      (value) => {
        if (mine !== generation.current) return;
        setData(value);
        setError(undefined);
      },
      (err: unknown) => {
        if (mine !== generation.current) return;
        setError(err instanceof Error ? err : new Error(String(err)));
      },
    );
  };
  useEffect(() => {
    run();
    if (!everyMs) return undefined;
    const timer = setInterval(run, everyMs);
    return () => clearInterval(timer);
  }, deps);
  return { data, error, reload: run };
}
