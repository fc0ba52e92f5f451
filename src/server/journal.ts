// Episodes that outlive the process (--state DIR). An episode is its task plus the calls made in it: every
// call goes through the lab's deterministic Episode over a fresh copy of the world, so replaying the calls
// rebuilds the same conversation, the same observations and the same database hash. The journal is one
// append-only JSON-lines file, DIR/episodes.jsonl:
//   {"e":"create","id","task","client","created","mcp"}   {"e":"call","id","name","arguments"}   {"e":"end","id","why"}
//   {"e":"act","id","text","mode"}   {"e":"rehearse","id","text"}   (whole trajectories: trajectory.ts)
// Each record is written (write(2)) when it happens, and fdatasync'ed before the request that made it is
// answered, so an answered call survives a crash of the process (kill -9: the page cache has it) and of the
// machine. The fdatasync is a group commit: requests answered in the same moment wait on one sync (one sync
// per call cost half the throughput and seconds of p99 on a busy disk). A graceful shutdown writes nothing: the live
// episodes are still live after a restart. On open, the journal is read, a torn last line (a crash in the
// middle of a write) is dropped, and the file is compacted to the live episodes (temp file, fsync, rename);
// while running, it is compacted again whenever released and expired episodes make up most of it.
//
// Why not an embedded database: the lab's only persistent need is this ordered log, replayed in full on
// start; node:sqlite needs Node 22 (the lab supports 20) and better-sqlite3 a native build. A JSONL log is
// readable with jq, has no dependency, and one write + fdatasync per call costs about what the call does.
import { fdatasync } from 'node:fs';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** One change to an episode, in order: a structured call, an Act generation, or a Rehearse generation. */
export type JournalCall = { name: unknown; arguments: unknown } | { act: string; mode: 'real' | 'simulate' } | { rehearse: string };

export interface JournaledEpisode {
  id: string;
  task: string;
  client: string;
  created: number;
  mcp: boolean;
  calls: JournalCall[];
}

type JournalRecord =
  | { e: 'create'; id: string; task: string; client: string; created: number; mcp: boolean }
  | { e: 'call'; id: string; name: unknown; arguments: unknown }
  | { e: 'act'; id: string; text: string; mode: 'real' | 'simulate' }
  | { e: 'rehearse'; id: string; text: string }
  | { e: 'end'; id: string; why: string };

export const JOURNAL_FILE = 'episodes.jsonl';

function recordOf(id: string, c: JournalCall): JournalRecord {
  if ('act' in c) return { e: 'act', id, text: c.act, mode: c.mode };
  if ('rehearse' in c) return { e: 'rehearse', id, text: c.rehearse };
  return { e: 'call', id, name: c.name, arguments: c.arguments };
}

/** Reads a journal's text into the live episodes, in creation order; `dropped` counts unreadable lines. */
export function readJournal(text: string): { live: JournaledEpisode[]; dropped: number } {
  const live = new Map<string, JournaledEpisode>();
  let dropped = 0;
  const lines = text.split('\n');
  for (const line of lines) {
    if (line.trim() === '') continue;
    let r: JournalRecord;
    try {
      r = JSON.parse(line) as JournalRecord;
    } catch {
      // A torn last line (the process died mid-write) or damage: skipped and counted, never fatal.
      dropped++;
      continue;
    }
    if (r === null || typeof r !== 'object' || typeof r.id !== 'string') {
      dropped++;
      continue;
    }
    if (r.e === 'create' && typeof r.task === 'string') {
      live.set(r.id, { id: r.id, task: r.task, client: typeof r.client === 'string' ? r.client : 'local', created: Number(r.created) || Date.now(), mcp: r.mcp === true, calls: [] });
    } else if (r.e === 'call') {
      live.get(r.id)?.calls.push({ name: r.name, arguments: r.arguments });
    } else if (r.e === 'act' && typeof r.text === 'string') {
      live.get(r.id)?.calls.push({ act: r.text, mode: r.mode === 'simulate' ? 'simulate' : 'real' });
    } else if (r.e === 'rehearse' && typeof r.text === 'string') {
      live.get(r.id)?.calls.push({ rehearse: r.text });
    } else if (r.e === 'end') {
      live.delete(r.id);
    } else dropped++;
  }
  return { live: [...live.values()], dropped };
}

export class Journal {
  private fd: number | null = null;
  /** Records written, and how many of them an fdatasync has made durable. */
  private written = 0;
  private synced = 0;
  private syncing: Promise<void> | null = null;
  /** Each live episode's lines, in order: what a compaction writes. */
  private readonly lines = new Map<string, string[]>();
  private liveLines = 0;
  private fileLines = 0;

  private constructor(
    readonly dir: string,
    readonly path: string,
    /** Compact once the file holds this many lines and four times the live ones. */
    private readonly compactAt: number,
  ) {}

  /**
   * Opens (creating) DIR/episodes.jsonl: returns the journal, compacted to its live episodes, and those
   * episodes for the caller to rebuild.
   */
  static open(dir: string, o: { compactAt?: number } = {}): { journal: Journal; live: JournaledEpisode[]; dropped: number } {
    mkdirSync(dir, { recursive: true });
    const path = join(dir, JOURNAL_FILE);
    const { live, dropped } = existsSync(path) ? readJournal(readFileSync(path, 'utf8')) : { live: [], dropped: 0 };
    const j = new Journal(dir, path, o.compactAt ?? 100_000);
    for (const ep of live) {
      const lines = [JSON.stringify({ e: 'create', id: ep.id, task: ep.task, client: ep.client, created: ep.created, mcp: ep.mcp }), ...ep.calls.map((c) => JSON.stringify(recordOf(ep.id, c)))];
      j.lines.set(ep.id, lines);
      j.liveLines += lines.length;
    }
    j.rewrite();
    return { journal: j, live, dropped };
  }

  /** How many lines the file holds (for tests and /health). */
  get size(): { fileLines: number; liveLines: number } {
    return { fileLines: this.fileLines, liveLines: this.liveLines };
  }

  /**
   * Replaces the file by the live episodes' lines: a temp file, fsync, rename, fsync of the directory (the
   * rename is durable only then). Everything live is on disk afterwards, so nothing is left to sync.
   */
  private rewrite(): void {
    const tmp = this.path + '.tmp';
    const t = openSync(tmp, 'w', 0o600);
    try {
      const all = [...this.lines.values()].flat();
      if (all.length > 0) writeSync(t, all.join('\n') + '\n');
      fsyncSync(t);
    } finally {
      closeSync(t);
    }
    renameSync(tmp, this.path);
    const d = openSync(this.dir, 'r');
    try {
      fsyncSync(d);
    } finally {
      closeSync(d);
    }
    if (this.fd !== null) closeSync(this.fd);
    this.fd = openSync(this.path, 'a', 0o600);
    this.fileLines = this.liveLines;
    this.synced = this.written;
  }

  private append(r: JournalRecord): void {
    if (this.fd === null) return;
    const line = JSON.stringify(r);
    writeSync(this.fd, line + '\n');
    this.written++;
    this.fileLines++;
    if (r.e === 'end') {
      this.liveLines -= this.lines.get(r.id)?.length ?? 0;
      this.lines.delete(r.id);
    } else {
      let l = this.lines.get(r.id);
      if (!l) this.lines.set(r.id, (l = []));
      l.push(line);
      this.liveLines++;
    }
    // Released and expired episodes would grow the file forever; compact between syncs (a sync in flight
    // holds the old descriptor), once the dead lines clearly outnumber the live ones.
    if (!this.syncing && this.fileLines >= this.compactAt && this.fileLines > 4 * this.liveLines) this.rewrite();
  }

  /** Resolves once every record written so far is on disk (one fdatasync serves all who wait on it). */
  async durable(): Promise<void> {
    while (this.synced < this.written && this.fd !== null) {
      if (!this.syncing) {
        const upTo = this.written;
        const fd = this.fd;
        this.syncing = new Promise<void>((res, rej) => fdatasync(fd, (e) => (e ? rej(e) : res()))).then(
          () => {
            this.synced = Math.max(this.synced, upTo);
            this.syncing = null;
          },
          (e: unknown) => {
            this.syncing = null;
            throw e;
          },
        );
      }
      await this.syncing;
    }
  }

  create(ep: Omit<JournaledEpisode, 'calls'>): void {
    this.append({ e: 'create', id: ep.id, task: ep.task, client: ep.client, created: ep.created, mcp: ep.mcp });
  }

  call(id: string, name: unknown, args: unknown): void {
    this.append({ e: 'call', id, name, arguments: args });
  }

  step(id: string, c: JournalCall): void {
    this.append(recordOf(id, c));
  }

  end(id: string, why: string): void {
    this.append({ e: 'end', id, why });
  }

  /** Closes the file after a last sync (a graceful stop loses nothing either). */
  async close(): Promise<void> {
    await this.durable().catch(() => {});
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}
