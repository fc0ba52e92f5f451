// Who may talk to the server. Every request, on every route (MCP and JSON alike), passes these checks before
// its body is read:
//   Host     must name an allowed host (403). A web page on a rebinding name (attacker.example resolving to
//            127.0.0.1) reaches a loopback port with *its* name in Host; allowing only loopback names (and
//            this machine's names when bound beyond loopback, and --allowed-hosts) shuts that door.
//   Origin   when a browser sends one, its host must be allowed too (403): a page elsewhere that reaches us
//            by an allowed name (a plain cross-origin fetch to http://127.0.0.1:P) is still refused.
//   Bearer   when a token is set, `Authorization: Bearer TOKEN` (401). Required to bind a non-loopback address:
//            anything on the network could otherwise drive the server.
//   Content-Type  a POST to a JSON route must say application/json (415). Browsers send text/plain,
//            form and multipart POSTs cross-origin without a CORS preflight ("simple requests"); a JSON type
//            forces the preflight, which this server never answers with CORS headers, so it never passes.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hostname, networkInterfaces } from 'node:os';
import { ApiError } from './episodes';

export const LOOPBACK_HOSTS = ['localhost', '127.0.0.1', '::1'];

/** True for an address that only this machine can reach (127.0.0.0/8, ::1, localhost). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h) || h === '::ffff:127.0.0.1';
}

export interface GuardOptions {
  /** The address the server binds. */
  bind: string;
  /** Extra host names (or IP literals) clients may use; '*' allows any (only sensible with a token). */
  allowedHosts?: readonly string[];
  /** The bearer token; undefined: none (only allowed on a loopback bind). */
  token?: string;
}

export interface Guard {
  /** Throws the ApiError that refuses `req`, if any. */
  check(req: IncomingMessage, jsonBody: boolean): void;
  /** The host names allowed, for the log line "listening". */
  hosts: readonly string[] | '*';
}

/** Host name of a Host header value or an origin's authority ("[::1]:80" -> "::1", "a.b:80" -> "a.b"). */
function hostOf(authority: string): string {
  const a = authority.trim().toLowerCase();
  if (a.startsWith('[')) return a.slice(1, a.indexOf(']') > 0 ? a.indexOf(']') : undefined);
  const colon = a.lastIndexOf(':');
  return colon >= 0 && a.indexOf(':') === colon ? a.slice(0, colon) : a;
}

const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();

export function createGuard(o: GuardOptions): Guard {
  if (o.token !== undefined && o.token.length < 16) throw new Error('the token must be at least 16 characters');
  if (!isLoopback(o.bind) && o.token === undefined) {
    throw new Error(`binding ${o.bind} (not a loopback address) needs a token (--token-file FILE or ENVACE_TOKEN): without one, anything that can reach the port drives the server`);
  }
  const any = o.allowedHosts?.includes('*') ?? false;
  const hosts = new Set(LOOPBACK_HOSTS);
  for (const h of o.allowedHosts ?? []) if (h !== '*') hosts.add(hostOf(h));
  if (!isLoopback(o.bind)) {
    // Bound beyond loopback: clients reach us by this machine's addresses or its name. IP literals cannot be
    // rebound (rebinding needs a DNS name), so admitting them costs nothing.
    const wildcard = o.bind === '0.0.0.0' || o.bind === '::';
    if (!wildcard) hosts.add(hostOf(o.bind));
    else for (const addrs of Object.values(networkInterfaces())) for (const a of addrs ?? []) hosts.add(a.address.toLowerCase());
    hosts.add(hostname().toLowerCase());
  }
  const want = o.token === undefined ? null : digest(o.token);

  function check(req: IncomingMessage, jsonBody: boolean): void {
    const host = req.headers.host;
    if (typeof host !== 'string' || host === '') throw new ApiError(400, 'bad_request', 'the request has no Host header');
    if (!any && !hosts.has(hostOf(host))) {
      throw new ApiError(403, 'forbidden_host', `Host ${JSON.stringify(host.slice(0, 100))} is not allowed (allowed: ${[...hosts].join(', ')}; the server's --allowed-hosts adds names)`);
    }
    const origin = req.headers.origin;
    if (origin !== undefined) {
      let oh: string | null = null;
      try {
        const u = new URL(origin);
        if (u.protocol === 'http:' || u.protocol === 'https:') oh = u.hostname.replace(/^\[|\]$/g, '').toLowerCase();
      } catch {
        /* "null" and other opaque origins: refused below */
      }
      // '*' widens Host only: a browser page stays refused unless its own host is a named one.
      if (oh === null || !hosts.has(oh)) {
        throw new ApiError(403, 'forbidden_origin', `Origin ${JSON.stringify(origin.slice(0, 100))} is not allowed: web pages may not drive this server`);
      }
    }
    if (want) {
      const auth = req.headers.authorization ?? '';
      const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
      if (!m || !timingSafeEqual(digest(m[1]), want)) {
        throw new ApiError(401, 'unauthorized', m ? 'wrong bearer token' : 'this server needs "Authorization: Bearer TOKEN" (the token it was started with)');
      }
    }
    if (jsonBody) {
      const ct = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      if (ct !== 'application/json') {
        throw new ApiError(415, 'unsupported_media_type', `a POST body must be JSON with "content-type: application/json" (got ${ct ? JSON.stringify(ct.slice(0, 100)) : 'none'})`);
      }
    }
  }

  return { check, hosts: any ? '*' : [...hosts] };
}
