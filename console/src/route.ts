import { useEffect, useState } from 'preact/hooks';

/** The hash route (`#/users/usr_1` gives `/users/usr_1`); pages link with plain `href="#/..."`. */
export function currentRoute(): string {
  return location.hash.replace(/^#/, '') || '/';
}

export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const onChange = () => setRoute(currentRoute());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export function navigate(path: string): void {
  location.hash = path;
}
