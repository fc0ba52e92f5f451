// Cross-origin isolation on any static host. Shared memory (SharedArrayBuffer: the CPU fast path's threads, a
// Cancel that reaches a busy worker at once) needs the page cross-origin isolated, which takes two response
// headers (COOP/COEP) that a static host such as GitHub Pages cannot send. A built lab registers its own
// service worker (public/coi-sw.js), which adds them to every same-origin response and keeps the model files
// in Cache Storage; a page that was not isolated reloads once under it. Where no service worker can run (plain
// http away from localhost, a browser that blocks them) the lab runs on the single-thread path and says so.
// main.ts awaits isolate() before it imports the page, so the policy worker starts under the final policy.

export interface Isolation {
  /** Whether this page is cross-origin isolated (shared memory is available). */
  isolated: boolean;
  /** Whether the lab's service worker controls the page (then it also serves the model files from its cache). */
  serviceWorker: boolean;
  /** Why the page is not isolated ('' when it is). */
  why: string;
}

/** What isolate() found; read by the page once it is mounted. */
export const isolation: Isolation = { isolated: false, serviceWorker: false, why: '' };

const RELOADED = 'envace-lab:reloaded-for-isolation';
/** How long the page waits for the worker's registration, then for its control, before it runs without it. */
const REGISTER_WAIT_MS = 8_000;
const CONTROL_WAIT_MS = 10_000;

export interface IsolateOptions {
  /** The app's base path (import.meta.env.BASE_URL): the worker's scope and where coi-sw.js is served. */
  base: string;
  /**
   * The version of the cached files (the build's hash of models/ and data/), which names the worker's cache;
   * null under the Vite dev server, which sends the headers itself: no service worker runs there.
   */
  version: string | null;
}

function record(v: Isolation): Isolation {
  Object.assign(isolation, v);
  return isolation;
}

/** The session flag that stops a reload loop when a reload under the worker does not isolate the page. */
function reloadedOnce(set?: boolean): boolean {
  try {
    if (set === true) sessionStorage.setItem(RELOADED, '1');
    if (set === false) sessionStorage.removeItem(RELOADED);
    return sessionStorage.getItem(RELOADED) === '1';
  } catch {
    return true; // no session storage: never reload
  }
}

/** Resolves true once a service worker controls this page, false after `ms`. */
function controlled(reg: ServiceWorkerRegistration, ms: number): Promise<boolean> {
  const sw = navigator.serviceWorker;
  if (sw.controller) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    sw.addEventListener('controllerchange', () => (clearTimeout(t), resolve(true)), { once: true });
    // An active worker that does not control this page (a hard reload skips it) is asked to claim it; a new
    // one claims every page when it activates.
    reg.active?.postMessage('claim');
  });
}

/**
 * Makes the page cross-origin isolated where it can: registers the lab's service worker, waits until it
 * controls the page, and reloads once when the page is not isolated yet (a document's COOP/COEP apply from
 * its navigation). Never throws: where it cannot, the lab runs on one thread and `why` says why.
 */
export async function isolate(opts: IsolateOptions): Promise<Isolation> {
  try {
    return await isolateIn(opts);
  } catch (e) {
    const now = globalThis.crossOriginIsolated === true;
    return record({ isolated: now, serviceWorker: false, why: now ? '' : `the service worker could not start (${(e as Error).message})` });
  }
}

async function isolateIn(opts: IsolateOptions): Promise<Isolation> {
  const now = () => globalThis.crossOriginIsolated === true;
  if (opts.version === null) return record({ isolated: now(), serviceWorker: false, why: now() ? '' : 'the dev server did not send the COOP/COEP headers' });
  const sw = (navigator as Navigator & { serviceWorker?: ServiceWorkerContainer }).serviceWorker;
  if (!sw) {
    const why = window.isSecureContext ? 'this browser runs no service workers here' : 'service workers need https (or localhost), and this page came over plain http';
    return record({ isolated: now(), serviceWorker: false, why: now() ? '' : why });
  }
  let reg: ServiceWorkerRegistration;
  try {
    // A registration can also hang rather than fail (a browser or automation that blocks service workers).
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${REGISTER_WAIT_MS / 1000} s`)), REGISTER_WAIT_MS));
    reg = await Promise.race([sw.register(`${opts.base}coi-sw.js?v=${encodeURIComponent(opts.version)}`, { scope: opts.base }), timeout]);
    // Playwright's serviceWorkers: 'block' answers with no registration at all.
    if (!reg) throw new Error('the browser returned no registration');
  } catch (e) {
    return record({ isolated: now(), serviceWorker: false, why: now() ? '' : `the service worker could not be registered (${(e as Error).message})` });
  }
  if (!(await controlled(reg, CONTROL_WAIT_MS)))
    return record({ isolated: now(), serviceWorker: false, why: now() ? '' : `the service worker did not take control of the page within ${CONTROL_WAIT_MS / 1000} s` });
  if (!now() && !reloadedOnce()) {
    reloadedOnce(true);
    location.reload();
    return new Promise<Isolation>(() => undefined); // the reload replaces this page
  }
  reloadedOnce(false);
  return record({ isolated: now(), serviceWorker: true, why: now() ? '' : 'a reload under the service worker did not isolate the page' });
}

/** The loaded policy's side of the story: the worker's own isolation and the backend's thread count. */
export interface ThreadInfo {
  backend: string;
  /** Threads of a CPU backend (null on WebGPU). */
  threads: number | null;
  /** Whether the policy worker is cross-origin isolated (it shares memory with its threads only then). */
  isolated: boolean;
}

/** One sentence on which path runs: isolated with threads, or the single-thread path and why. */
export function isolationText(t: ThreadInfo, page: Isolation): string {
  const runs =
    t.backend === 'webgpu' ? 'the model runs on the GPU' : t.threads && t.threads > 1 ? `the CPU fast path runs on ${t.threads} threads` : `the ${t.backend} backend runs on one thread`;
  if (t.isolated) {
    const how = page.serviceWorker ? "by this site's service worker (it adds the COOP/COEP headers a static host cannot send)" : "by the server's COOP/COEP headers";
    return `Cross-origin isolated ${how}: shared memory is on, ${runs}, and Cancel reaches busy work at once.`;
  }
  const why = page.why || 'the page has no COOP/COEP headers';
  const cpu = t.backend === 'webgpu' ? `${runs}, but a CPU backend would have one thread` : 'the CPU runs on one thread';
  return `Single-thread path: this page is not cross-origin isolated (${why}), so there is no shared memory: ${cpu}, and Cancel waits until the worker pauses between pieces of work.`;
}
