// The lab's service worker, for a static host (GitHub Pages and the like) that cannot set response headers.
// 1. Cross-origin isolation: it adds Cross-Origin-Opener-Policy and Cross-Origin-Embedder-Policy to every
//    same-origin response it serves (the "coi-serviceworker" technique), so a page it controls is cross-origin
//    isolated: SharedArrayBuffer works, the CPU fast path runs on several threads, Cancel is instant.
// 2. Model cache: the bundled models and the retail data (models/ and data/ under its scope) come from Cache
//    Storage once fetched, so a reload fetches no model file again. The cache's name carries the version of
//    those files (?v= on this script's URL, a hash of their contents made by the build): a deployment with
//    other files registers a new worker, which drops the old cache on activation.
// The page registers it (src/ui/isolation.ts) and reloads once under it when it was not isolated already.
// Cross-origin requests are left to the browser. Plain JavaScript: public/ is copied into the build as is.

const VERSION = new URL(self.location.href).searchParams.get('v') || 'unversioned';
const PREFIX = 'envace-lab-files-';
const CACHE = PREFIX + VERSION;
const SCOPE = new URL(self.registration.scope).pathname;
const CACHED = [SCOPE + 'models/', SCOPE + 'data/'];

self.addEventListener('install', () => self.skipWaiting());

self.addEventListener('activate', (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) if (name.startsWith(PREFIX) && name !== CACHE) await caches.delete(name);
      await self.clients.claim();
    })(),
  );
});

// A page loaded past this worker (a hard reload) asks it to take control, then reloads through it.
self.addEventListener('message', (event) => {
  if (event.data === 'claim') event.waitUntil(self.clients.claim());
});

/** The response with the two isolation headers; opaque and redirect responses cannot be rewritten and pass as they are. */
function isolated(res) {
  if (res.type !== 'basic' && res.type !== 'default') return res;
  const headers = new Headers(res.headers);
  headers.set('Cross-Origin-Opener-Policy', 'same-origin');
  headers.set('Cross-Origin-Embedder-Policy', 'require-corp');
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}

/** Whether a same-origin request is for a file this worker keeps (a model file or the retail data). */
function cacheable(req, url) {
  return (req.method === 'GET' || req.method === 'HEAD') && !req.headers.has('range') && CACHED.some((p) => url.pathname.startsWith(p));
}

/**
 * Cache first. Found and absent files (200 and 404) are both kept: the loader asks for files a model may lack
 * (model.safetensors.index.json), and a reload must not ask the network again. A HEAD is answered from the
 * kept GET; a HEAD that misses goes to the network, and only its 404 is kept (the GET that follows fetches
 * the body of a file that exists).
 */
async function fromCache(event, url) {
  const req = event.request;
  const cache = await caches.open(CACHE);
  const key = url.origin + url.pathname + url.search;
  const hit = await cache.match(key);
  if (hit) return req.method === 'HEAD' ? new Response(null, { status: hit.status, statusText: hit.statusText, headers: hit.headers }) : hit;
  const res = await fetch(req);
  if (req.method === 'GET' && (res.status === 200 || res.status === 404)) event.waitUntil(cache.put(key, res.clone()));
  else if (req.method === 'HEAD' && res.status === 404) event.waitUntil(cache.put(key, new Response(null, { status: 404, statusText: res.statusText, headers: res.headers })));
  return res;
}

self.addEventListener('fetch', (event) => {
  const req = event.request;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  // Chromium's only-if-cached request outside same-origin mode cannot be fetched from a worker.
  if (req.cache === 'only-if-cached' && req.mode !== 'same-origin') return;
  event.respondWith((cacheable(req, url) ? fromCache(event, url) : fetch(req)).then(isolated));
});
