/**
 * The workbench page: boot (session, feed), the frame (navigation, MCP URL, logout) and the
 * router. Views live in views/; the page reaches the daemon only through api.ts.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, login, logout, setCsrf, setUnauthorizedHandler, type SessionState } from './api';
import { useRoute } from './router';
import { connectFeed, disconnectFeed, loadHarnesses, useStore } from './state';
import { CodeView } from './views/code';
import { DeployView } from './views/deploy';
import { DetailView } from './views/detail';
import { HarnessesView } from './views/harnesses';
import { HealthView } from './views/health';
import { IndexView } from './views/index-view';
import { RunView } from './views/run';
import { WakesView } from './views/wakes';
import { CopyButton } from './views/ui';

type Phase =
  { kind: 'booting' } | { kind: 'login'; error?: string } | { kind: 'ready'; auth: 'token' | 'open' };

const NAV: [string, string][] = [
  ['#/', 'Harnesses'],
  ['#/deploy', 'Deploy'],
  ['#/wakes', 'Wakes'],
  ['#/index', 'Index'],
  ['#/health', 'Health'],
];

function Login(props: { error?: string; onDone: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(props.error ?? '');
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await login(token);
      setToken('');
      props.onDone();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="login" id="main">
      <form class="card login-card" onSubmit={submit} method="post" action="#">
        <h1>
          <span class="logo" aria-hidden="true" />
          berm workbench
        </h1>
        <p class="muted">
          This bermd requires its token. It is exchanged for a session cookie and kept nowhere.
        </p>
        <label for="token">Token</label>
        <input
          id="token"
          name="token"
          type="password"
          autocomplete="current-password"
          required
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
        />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button class="primary" type="submit" disabled={busy}>
          {busy ? 'Logging in…' : 'Log in'}
        </button>
      </form>
    </main>
  );
}

function Frame(props: { auth: 'token' | 'open'; onLogout: () => void }) {
  const route = useRoute();
  const store = useStore();
  const [top] = route.parts;
  const current = top === undefined ? '#/' : top === 'h' || top === 'code' ? '#/' : `#/${top}`;
  let view;
  if (top === undefined) view = <HarnessesView />;
  else if (top === 'deploy') view = <DeployView />;
  else if (top === 'h' && route.parts[2] === 'run' && route.parts[3] !== undefined)
    view = <RunView harness={route.parts[1]!} tool={route.parts[3]} />;
  else if (top === 'h' && route.parts[1] !== undefined) view = <DetailView name={route.parts[1]} />;
  else if (top === 'wakes') view = <WakesView />;
  else if (top === 'code' && route.parts[1] !== undefined)
    view = <CodeView harness={route.parts[1]} pc={route.query.get('pc')} fn={route.query.get('function')} />;
  else if (top === 'index') view = <IndexView />;
  else if (top === 'health') view = <HealthView />;
  else
    view = (
      <section>
        <h1>Not found</h1>
        <p>
          No view at <code>{location.hash}</code>. <a href="#/">Back to the harnesses</a>.
        </p>
      </section>
    );
  return (
    <>
      <a
        class="skip"
        href="#main"
        onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}
      >
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="#/">
          <span class="logo" aria-hidden="true" />
          berm
        </a>
        <nav aria-label="Views">
          <ul>
            {NAV.map(([h, label]) => (
              <li key={h}>
                <a href={h} aria-current={current === h ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="top-actions">
          <span class={`live ${store.live ? 'on' : 'off'}`} role="status" title="Change feed">
            {store.live ? 'Live' : 'Offline'}
          </span>
          <CopyButton text={`${location.origin}/mcp`} label="Copy MCP URL" />
          {props.auth === 'token' && (
            <button type="button" class="ghost" onClick={props.onLogout}>
              Log out
            </button>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {view}
      </main>
    </>
  );
}

function App() {
  const [phase, setPhase] = useState<Phase>({ kind: 'booting' });
  const boot = async (): Promise<void> => {
    try {
      const s = await api<SessionState>('GET', '/session');
      if (s.session && s.csrf) setCsrf(s.csrf);
      else if (s.auth === 'open') await login(null);
      else {
        setPhase({ kind: 'login' });
        return;
      }
      connectFeed();
      await loadHarnesses();
      setPhase({ kind: 'ready', auth: s.auth });
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) setPhase({ kind: 'login' });
      else setPhase({ kind: 'login', error: `bermd did not answer: ${(e as Error).message}` });
    }
  };
  useEffect(() => {
    setUnauthorizedHandler(() => {
      disconnectFeed();
      setCsrf(null);
      setPhase({ kind: 'login', error: 'The session ended; log in again.' });
    });
    void boot();
  }, []);
  if (phase.kind === 'booting')
    return (
      <main id="main" class="booting" aria-busy="true">
        <p>Connecting to bermd…</p>
      </main>
    );
  if (phase.kind === 'login') return <Login error={phase.error} onDone={() => void boot()} />;
  const doLogout = async (): Promise<void> => {
    try {
      await logout();
    } finally {
      disconnectFeed();
      setPhase({ kind: 'login' });
    }
  };
  return <Frame auth={phase.auth} onLogout={() => void doLogout()} />;
}

render(<App />, document.getElementById('app')!);
