// The page's isolation bootstrap (src/ui/isolation.ts) against stubbed browser globals: which path it takes
// (the service worker, a reload under it, or the single-thread path with a reason), that it reloads at most
// once, never hangs on a registration that does not answer and never throws; and the sentence the UI shows.
// The real thing in Chromium, on a static host: test/e2e/static-site.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isolate, isolationText, type Isolation } from '../../src/ui/isolation';

interface Stub {
  registered: string[];
  reloads: number;
  session: Map<string, string>;
  claimAsked: number;
}

/** A browser whose service-worker container behaves as `sw` says; `isolatedAfterControl` flips crossOriginIsolated once controlled. */
function browser(sw: 'none' | 'no-registration' | 'hangs' | 'rejects' | 'claims' | 'controls', opts: { isolated?: boolean; isolatedAfterControl?: boolean; secure?: boolean } = {}): Stub {
  const s: Stub = { registered: [], reloads: 0, session: new Map(), claimAsked: 0 };
  let controller: object | null = sw === 'controls' ? {} : null;
  const listeners: (() => void)[] = [];
  const container = {
    get controller() {
      return controller;
    },
    register: (url: string) => {
      s.registered.push(url);
      if (sw === 'no-registration') return Promise.resolve(undefined);
      if (sw === 'hangs') return new Promise(() => undefined);
      if (sw === 'rejects') return Promise.reject(new Error('SecurityError: blocked'));
      return Promise.resolve({
        active: {
          postMessage: (m: string) => {
            if (m !== 'claim') return;
            s.claimAsked++;
            controller = {};
            if (opts.isolatedAfterControl) vi.stubGlobal('crossOriginIsolated', true);
            for (const l of listeners) l();
          },
        },
      });
    },
    addEventListener: (_: string, l: () => void) => listeners.push(l),
  };
  vi.stubGlobal('navigator', sw === 'none' ? {} : { serviceWorker: container });
  vi.stubGlobal('window', { isSecureContext: opts.secure ?? true });
  vi.stubGlobal('crossOriginIsolated', opts.isolated ?? false);
  vi.stubGlobal('location', { reload: () => s.reloads++ });
  vi.stubGlobal('sessionStorage', {
    getItem: (k: string) => s.session.get(k) ?? null,
    setItem: (k: string, v: string) => s.session.set(k, v),
    removeItem: (k: string) => s.session.delete(k),
  });
  return s;
}

const OPTS = { base: '/envace-lab/', version: 'abc123' };
/** Whether a promise settles within a few event-loop turns (isolate() never resolves once it has reloaded the page). */
const settles = async (p: Promise<unknown>) => Promise.race([p.then(() => true), new Promise((r) => setTimeout(() => r(false), 20))]);

describe('isolate()', () => {
  beforeEach(() => vi.unstubAllGlobals());
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it('under the dev server (no version) registers nothing and reports the page as it is', async () => {
    const s = browser('claims', { isolated: true });
    expect(await isolate({ base: '/', version: null })).toEqual({ isolated: true, serviceWorker: false, why: '' });
    expect(s.registered).toEqual([]);
  });

  it('registers the worker at the base path with the files version, and reloads once when control alone does not isolate the page', async () => {
    const s = browser('claims');
    expect(await settles(isolate(OPTS))).toBe(false); // the reload replaces the page
    expect(s.registered).toEqual(['/envace-lab/coi-sw.js?v=abc123']);
    expect(s.claimAsked).toBe(1);
    expect(s.reloads).toBe(1);
    // The reloaded page, still not isolated (a browser that ignores the worker's headers): no second reload.
    const second = await isolate(OPTS);
    expect(s.reloads).toBe(1);
    expect(second).toEqual({ isolated: false, serviceWorker: true, why: 'a reload under the service worker did not isolate the page' });
    expect(s.session.size).toBe(0); // the flag is cleared, so a later visit may reload again
  });

  it('controlled and isolated: the service-worker path, without a reload', async () => {
    const s = browser('controls', { isolated: true });
    s.session.set('envace-lab:reloaded-for-isolation', '1');
    expect(await isolate(OPTS)).toEqual({ isolated: true, serviceWorker: true, why: '' });
    expect(s.reloads).toBe(0);
    expect(s.session.size).toBe(0);
  });

  it('a page the worker claims that becomes isolated needs no reload', async () => {
    const s = browser('claims', { isolatedAfterControl: true });
    expect(await isolate(OPTS)).toEqual({ isolated: true, serviceWorker: true, why: '' });
    expect(s.reloads).toBe(0);
  });

  it('takes the single-thread path, saying why, when no service worker can run', async () => {
    browser('none', { secure: false });
    expect((await isolate(OPTS)).why).toBe('service workers need https (or localhost), and this page came over plain http');
    browser('none', { secure: true });
    expect((await isolate(OPTS)).why).toBe('this browser runs no service workers here');
    browser('rejects');
    expect(await isolate(OPTS)).toEqual({ isolated: false, serviceWorker: false, why: 'the service worker could not be registered (SecurityError: blocked)' });
    browser('no-registration');
    expect((await isolate(OPTS)).why).toBe('the service worker could not be registered (the browser returned no registration)');
  });

  it('does not wait forever for a registration that never answers', async () => {
    vi.useFakeTimers();
    const s = browser('hangs');
    const p = isolate(OPTS);
    await vi.advanceTimersByTimeAsync(8_000);
    expect(await p).toEqual({ isolated: false, serviceWorker: false, why: 'the service worker could not be registered (no answer within 8 s)' });
    expect(s.reloads).toBe(0);
  });

  it('a page already isolated by its server stays on that path when the worker cannot start', async () => {
    browser('rejects', { isolated: true });
    expect(await isolate(OPTS)).toEqual({ isolated: true, serviceWorker: false, why: '' });
  });
});

describe('isolationText()', () => {
  const sw: Isolation = { isolated: true, serviceWorker: true, why: '' };
  const headers: Isolation = { isolated: true, serviceWorker: false, why: '' };
  const none: Isolation = { isolated: false, serviceWorker: false, why: 'the service worker could not be registered (blocked)' };

  it('says how the page is isolated and how many threads the CPU fast path runs on', () => {
    expect(isolationText({ backend: 'cpu-fast', threads: 4, isolated: true }, sw)).toBe(
      "Cross-origin isolated by this site's service worker (it adds the COOP/COEP headers a static host cannot send): shared memory is on, the CPU fast path runs on 4 threads, and Cancel reaches busy work at once.",
    );
    expect(isolationText({ backend: 'webgpu', threads: null, isolated: true }, headers)).toBe(
      "Cross-origin isolated by the server's COOP/COEP headers: shared memory is on, the model runs on the GPU, and Cancel reaches busy work at once.",
    );
  });

  it('names the single-thread path and its reason', () => {
    expect(isolationText({ backend: 'cpu-fast', threads: 1, isolated: false }, none)).toBe(
      'Single-thread path: this page is not cross-origin isolated (the service worker could not be registered (blocked)), so there is no shared memory: the CPU runs on one thread, and Cancel waits until the worker pauses between pieces of work.',
    );
    expect(isolationText({ backend: 'webgpu', threads: null, isolated: false }, { ...none, why: '' })).toMatch(
      /^Single-thread path: this page is not cross-origin isolated \(the page has no COOP\/COEP headers\), so there is no shared memory: the model runs on the GPU, but a CPU backend would have one thread,/,
    );
  });
});
