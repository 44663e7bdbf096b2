/**
 * Hash routing: `#/`, `#/deploy`, `#/h/{name}`, `#/h/{name}/run/{tool}`, `#/wakes`, `#/code/{name}`
 * (`?pc=0x…` or `?function=…`), `#/index`, `#/health`. The hash never holds a secret.
 */
import { useEffect, useState } from 'preact/hooks';

/** The current route: path segments (decoded) and query. */
export interface Route {
  parts: string[];
  query: URLSearchParams;
}

function parse(): Route {
  const h = location.hash.replace(/^#/, '') || '/';
  const [path, q] = h.split('?') as [string, string | undefined];
  return {
    parts: path
      .split('/')
      .filter((p) => p !== '')
      .map((p) => decodeURIComponent(p)),
    query: new URLSearchParams(q ?? ''),
  };
}

/** The route, re-rendered on every hash change. */
export function useRoute(): Route {
  const [route, setRoute] = useState(parse);
  useEffect(() => {
    const on = (): void => setRoute(parse());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return route;
}

/** A link target for a route: `href('h', name)` → `#/h/name`. */
export function href(...parts: string[]): string {
  return '#/' + parts.map((p) => encodeURIComponent(p)).join('/');
}

/** Go to a route. */
export function go(target: string): void {
  location.hash = target.replace(/^#/, '');
}
