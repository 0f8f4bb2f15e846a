import { useCallback, useEffect, useState } from "react";

interface Result<T> {
  load: () => Promise<T>;
  data?: T;
  error?: unknown;
}

/**
 * Runs `load` (memoise it with useCallback: a new function loads again) and keeps its latest
 * result. `reload` runs it again without clearing the data shown; `setData` updates it locally.
 */
export function useLoader<T>(load: () => Promise<T>) {
  const [result, setResult] = useState<Result<T> | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      (data) => live && setResult({ load, data }),
      (error: unknown) => live && setResult({ load, error }),
    );
    return () => {
      live = false;
    };
  }, [load, version]);
  const current = result?.load === load ? result : null;
  const reload = useCallback(() => setVersion((v) => v + 1), []);
  const setData = useCallback((update: (data: T | undefined) => T) => {
    setResult((previous) => (previous ? { load: previous.load, data: update(previous.data) } : previous));
  }, []);
  return { data: current?.data, error: current?.error, loading: current === null, reload, setData };
}
