// The live episodes: a TTL (idle time), a global cap and a per-client quota, a reaper for expired ones, and
// the journal (journal.ts) that every change goes through when the server keeps state (--state DIR).
import type { Domain, GroundingExample, Observation, Task, ToolDefinition } from '../env/domain';
import { referenceGrounding } from '../rollout/rollout';
import { ApiError, ServerEpisode, type TaskSet } from './episodes';
import type { Journal, JournalCall, JournaledEpisode } from './journal';
import { applyAct, applyRehearse, type TurnResult } from './trajectory';

export interface EpisodeStoreOptions {
  /** Idle time after which an episode is reclaimed (ms). */
  ttlMs: number;
  /** Live episodes at most; creating one more is refused (503). */
  maxEpisodes: number;
  /** Live episodes one client (one remote address) may hold; one more is refused (429). */
  maxPerClient?: number;
  /** Act turns per episode (each call is one turn, as in the lab). */
  maxTurns: number;
  /** Called when an episode goes away (released, expired, shut down). */
  onRemove?: (ep: ServerEpisode, why: 'released' | 'expired' | 'shutdown') => void;
  /** Where episodes are persisted (--state DIR); none: they live in memory only. */
  journal?: Journal;
}

export class EpisodeStore {
  private readonly live = new Map<string, ServerEpisode>();
  private readonly perClient = new Map<string, number>();
  private readonly groundingCache = new Map<string, GroundingExample[]>();
  private reaper: ReturnType<typeof setInterval> | null = null;
  readonly tools: ToolDefinition[];
  /** Counters for /health and logs. */
  readonly stats = { created: 0, restored: 0, released: 0, expired: 0, calls: 0 };

  constructor(
    readonly domain: Domain,
    readonly tasks: TaskSet,
    readonly opts: EpisodeStoreOptions,
  ) {
    this.tools = domain.definitions();
  }

  get size(): number {
    return this.live.size;
  }

  /** Starts the reaper (every min(ttl/2, 5 s)); unref'd, so it never keeps the process alive. */
  start(): void {
    if (this.reaper) return;
    this.reaper = setInterval(() => this.reap(), Math.max(10, Math.min(this.opts.ttlMs / 2, 5000)));
    this.reaper.unref();
  }

  task(id: unknown): Task {
    if (typeof id !== 'string') throw new ApiError(400, 'bad_request', '"task_id" must be a string');
    const t = this.tasks.byId.get(id);
    if (!t) throw new ApiError(404, 'unknown_task', `no task ${JSON.stringify(id.slice(0, 100))} on this server (GET /tasks lists them)`);
    return t;
  }

  /** Seconds until the first of `eps` expires if left idle (a Retry-After for refusals). */
  private retryAfter(eps: Iterable<ServerEpisode>): number {
    let first = Infinity;
    for (const e of eps) first = Math.min(first, e.lastUsed + this.opts.ttlMs);
    return Math.max(1, Math.ceil((Math.min(first, Date.now() + this.opts.ttlMs) - Date.now()) / 1000));
  }

  /** Live episodes of `client`. */
  countOf(client: string): number {
    return this.perClient.get(client) ?? 0;
  }

  create(taskId: unknown, client = 'local', o: { mcp?: boolean; restore?: { id: string; created: number } } = {}): ServerEpisode {
    const restore = o.restore;
    const task = this.task(taskId);
    const perClient = this.opts.maxPerClient ?? this.opts.maxEpisodes;
    if (!restore && (this.live.size >= this.opts.maxEpisodes || this.countOf(client) >= perClient)) this.reap();
    if (!restore && perClient < this.opts.maxEpisodes && this.countOf(client) >= perClient) {
      // Checked before the global cap: one client filling its share gets told so, and the others still get in.
      const mine = [...this.live.values()].filter((e) => e.client === client);
      throw new ApiError(429, 'client_quota', `this client (${client}) holds ${mine.length} live episodes, its quota; release some (DELETE /episodes/ID) or retry later`, this.retryAfter(mine));
    }
    if (!restore && this.live.size >= this.opts.maxEpisodes) {
      throw new ApiError(503, 'too_many_episodes', `${this.live.size} live episodes (the server's cap); release some or retry later`, this.retryAfter(this.live.values()));
    }
    let g = this.groundingCache.get(task.id);
    if (!g) {
      g = referenceGrounding(this.domain, task);
      this.groundingCache.set(task.id, g);
    }
    const ep = new ServerEpisode(this.domain, task, g, this.opts.maxTurns, client, restore?.id, restore?.created, o.mcp ?? false);
    if (!restore) this.opts.journal?.create({ id: ep.id, task: task.id, client, created: ep.created, mcp: ep.mcp });
    this.live.set(ep.id, ep);
    this.perClient.set(client, this.countOf(client) + 1);
    if (restore) this.stats.restored++;
    else this.stats.created++;
    return ep;
  }

  /** One call in `ep` (ServerEpisode.call), journaled before the caller answers it. */
  call(ep: ServerEpisode, name: unknown, args: unknown): Observation {
    const obs = ep.call(name, args);
    this.opts.journal?.call(ep.id, name, args);
    this.stats.calls++;
    return obs;
  }

  /** Resolves once what the journal holds so far is on disk: await it before answering a change. */
  durable(): Promise<void> {
    return this.opts.journal?.durable() ?? Promise.resolve();
  }

  /** A trajectory step (trajectory.ts: an Act or a Rehearse generation), journaled like a call. */
  step(ep: ServerEpisode, c: Exclude<JournalCall, { name: unknown }>): TurnResult {
    const r = 'act' in c ? applyAct(ep, c.act, c.mode) : applyRehearse(ep, c.rehearse);
    this.opts.journal?.step(ep.id, c);
    return r;
  }

  /**
   * Rebuilds journaled episodes by replaying their calls (the same deterministic path as when they were
   * made). An episode whose task this server does not serve is skipped and its id returned.
   */
  restore(eps: readonly JournaledEpisode[]): { restored: number; skipped: string[] } {
    const skipped: string[] = [];
    let restored = 0;
    for (const j of eps) {
      if (!this.tasks.byId.has(j.task)) {
        skipped.push(j.id);
        this.opts.journal?.end(j.id, 'task-not-served');
        continue;
      }
      const ep = this.create(j.task, j.client, { mcp: j.mcp, restore: { id: j.id, created: j.created } });
      for (const c of j.calls) {
        // The same code path as when the change was made, so errors it raised then it raises now: skip them.
        try {
          if ('name' in c) ep.call(c.name, c.arguments);
          else if ('act' in c) applyAct(ep, c.act, c.mode);
          else applyRehearse(ep, c.rehearse);
        } catch (e) {
          if (!(e instanceof ApiError)) throw e;
        }
      }
      restored++;
    }
    return { restored, skipped };
  }

  get(id: string): ServerEpisode {
    const ep = this.live.get(id);
    if (!ep) throw new ApiError(404, 'unknown_episode', `no live episode ${JSON.stringify(id.slice(0, 100))} (released, expired, or never created)`);
    ep.lastUsed = Date.now();
    return ep;
  }

  has(id: string): boolean {
    return this.live.has(id);
  }

  remove(id: string, why: 'released' | 'expired' | 'shutdown' = 'released'): boolean {
    const ep = this.live.get(id);
    if (!ep) return false;
    this.live.delete(id);
    const n = this.countOf(ep.client) - 1;
    if (n > 0) this.perClient.set(ep.client, n);
    else this.perClient.delete(ep.client);
    // A shutdown keeps the episode in the journal: it is live again after a restart.
    if (why !== 'shutdown') this.opts.journal?.end(id, why);
    if (why === 'released') this.stats.released++;
    if (why === 'expired') this.stats.expired++;
    const close = ep.close;
    ep.close = null;
    close?.();
    this.opts.onRemove?.(ep, why);
    return true;
  }

  /** Removes episodes idle for longer than the TTL; returns how many. */
  reap(now = Date.now()): number {
    let n = 0;
    for (const [id, ep] of this.live) {
      if (now - ep.lastUsed > this.opts.ttlMs) {
        this.remove(id, 'expired');
        n++;
      }
    }
    return n;
  }

  /** Stops the reaper and removes every episode. */
  shutdown(): void {
    if (this.reaper) clearInterval(this.reaper);
    this.reaper = null;
    for (const id of [...this.live.keys()]) this.remove(id, 'shutdown');
  }
}
