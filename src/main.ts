import { mount } from 'svelte';
import { isolate } from './ui/isolation';
import './ui/app.css';

/** The build's version of the cached files (vite.config.ts); null under the dev server. */
declare const __LAB_FILES_VERSION__: string | null;

// Isolation first (a service worker and one reload on a static host): the page, and with it the policy worker,
// is imported only once the page runs under its final cross-origin policy.
void (async () => {
  await isolate({ base: import.meta.env.BASE_URL, version: __LAB_FILES_VERSION__ });
  const { default: App } = await import('./ui/App.svelte');
  mount(App, { target: document.getElementById('app')! });
})();
