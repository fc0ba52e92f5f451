// A blank page to run the project's modules in from Chromium (the app's own page would start the whole lab),
// served by a Vite dev server from a folder (src/… and bench/… are imported by path). With ISOLATION the page
// is cross-origin isolated (COOP/COEP, as vite.config.ts sends for the lab), so it has shared memory.
// Used by `npm run bench -- cpu-browser` and test/engine/cpu-fast-browser.test.ts.
import { createServer, type ViteDevServer } from 'vite';

export const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

/** A listening dev server whose `/probe.html` (and every module) is sent with `headers`. */
export async function serveProbePage(root: string, headers: Record<string, string>): Promise<ViteDevServer> {
  const server = await createServer({
    configFile: false,
    root,
    logLevel: 'error',
    plugins: [
      {
        name: 'probe-page',
        configureServer(s) {
          s.middlewares.use('/probe.html', (_req, res) => {
            for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
            res.setHeader('Content-Type', 'text/html');
            res.end('<!doctype html><title>probe</title>');
          });
        },
      },
    ],
    server: { host: '127.0.0.1', port: 0, headers, hmr: false },
    optimizeDeps: { noDiscovery: true, include: [] },
  });
  await server.listen();
  return server;
}
