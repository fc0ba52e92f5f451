// A database of named tables of JSON records with copy-on-write episodes. The base (the domain's initial
// data) is deep-frozen and shared by every environment; an episode only holds the records it changed, so
// reset and snapshot cost O(changes), and the canonical hash reuses cached per-record hashes (O(records)).
// Writes happen inside a transaction that is discarded if the tool fails: a failing call cannot leave a
// partial write behind, whatever the tool code does.

import { canonicalJson, deepFreeze, hash64 } from './json';

export type Rec = Readonly<Record<string, unknown>>;

export interface StoreTx {
  get(table: string, id: string): Rec | undefined;
  /** Ids in the base order (tables never gain or lose records in these domains). */
  ids(table: string): readonly string[];
  /** Stores a new version of a record (the argument is frozen; do not edit it afterwards). */
  put(table: string, id: string, rec: object): void;
}

export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreError';
  }
}

/** The immutable, shared part: records, their order and their cached hashes. */
export class BaseData {
  readonly tables: ReadonlyMap<string, ReadonlyMap<string, Rec>>;
  readonly order: ReadonlyMap<string, readonly string[]>;
  private readonly sortedIds = new Map<string, string[]>();
  private readonly hashes = new Map<string, Map<string, string>>();
  readonly tableNames: readonly string[];

  constructor(data: Record<string, Record<string, Record<string, unknown>>>) {
    const tables = new Map<string, Map<string, Rec>>();
    const order = new Map<string, string[]>();
    for (const [name, recs] of Object.entries(data)) {
      const m = new Map<string, Rec>();
      for (const [id, r] of Object.entries(recs)) m.set(id, deepFreeze(r));
      tables.set(name, m);
      order.set(name, [...m.keys()]);
      this.sortedIds.set(name, [...m.keys()].sort());
      this.hashes.set(name, new Map());
    }
    this.tables = tables;
    this.order = order;
    this.tableNames = [...tables.keys()].sort();
  }

  sorted(table: string): readonly string[] {
    return this.sortedIds.get(table) ?? [];
  }

  /** Hash of the base version of a record, computed once. */
  baseHash(table: string, id: string): string {
    const cache = this.hashes.get(table)!;
    let h = cache.get(id);
    if (h === undefined) {
      h = hash64(canonicalJson(this.tables.get(table)!.get(id)));
      cache.set(id, h);
    }
    return h;
  }
}

/** Records changed in an episode, with their hashes: table -> id -> [record, hash]. */
export type Overlay = Map<string, Map<string, [Rec, string]>>;

export class Store {
  private overlay: Overlay = new Map();

  constructor(readonly base: BaseData) {}

  get(table: string, id: string): Rec | undefined {
    const o = this.overlay.get(table)?.get(id);
    if (o) return o[0];
    return this.base.tables.get(table)?.get(id);
  }

  ids(table: string): readonly string[] {
    return this.base.order.get(table) ?? [];
  }

  /**
   * Runs fn against a staging area; commits its puts only if fn returns normally. Records a tool reads
   * are frozen, so the only way to change state is put().
   */
  transaction<T>(fn: (tx: StoreTx) => T): T {
    const staged = new Map<string, Map<string, Rec>>();
    const tx: StoreTx = {
      get: (table, id) => staged.get(table)?.get(id) ?? this.get(table, id),
      ids: (table) => this.ids(table),
      put: (table, id, rec) => {
        if (!this.base.tables.get(table)?.has(id)) throw new StoreError(`no record ${table}/${id}`);
        let t = staged.get(table);
        if (!t) staged.set(table, (t = new Map()));
        t.set(id, deepFreeze(rec) as Rec);
      },
    };
    const out = fn(tx);
    for (const [table, recs] of staged) {
      let t = this.overlay.get(table);
      if (!t) this.overlay.set(table, (t = new Map()));
      for (const [id, rec] of recs) t.set(id, [rec, hash64(canonicalJson(rec))]);
    }
    return out;
  }

  reset(): void {
    this.overlay = new Map();
  }

  /** O(changes): records are frozen, so sharing them between snapshots is safe. */
  snapshot(): Overlay {
    const s: Overlay = new Map();
    for (const [t, m] of this.overlay) s.set(t, new Map(m));
    return s;
  }

  restore(s: Overlay): void {
    this.overlay = new Map();
    for (const [t, m] of s) this.overlay.set(t, new Map(m));
  }

  /**
   * Canonical hash of the whole database: tables by name, records by id, each contributing its id and
   * the hash of its canonical JSON. Equal databases hash equal whatever the key order of their records.
   */
  hash(): string {
    const parts: string[] = [];
    for (const table of this.base.tableNames) {
      const ov = this.overlay.get(table);
      parts.push('#' + table);
      for (const id of this.base.sorted(table)) {
        const o = ov?.get(id);
        parts.push(id + '=' + (o ? o[1] : this.base.baseHash(table, id)));
      }
    }
    return hash64(parts.join('\n'));
  }

  /** Records whose current content differs from the base, per table in base order. */
  changed(): Record<string, Record<string, Rec>> {
    const out: Record<string, Record<string, Rec>> = {};
    for (const table of this.base.order.keys()) {
      const recs: Record<string, Rec> = {};
      const ov = this.overlay.get(table);
      if (ov) {
        for (const id of this.ids(table)) {
          const o = ov.get(id);
          if (o && o[1] !== this.base.baseHash(table, id)) recs[id] = o[0];
        }
      }
      out[table] = recs;
    }
    return out;
  }

  /** The whole current database as plain data (for export; O(size)). */
  materialise(): Record<string, Record<string, Rec>> {
    const out: Record<string, Record<string, Rec>> = {};
    for (const table of this.base.order.keys()) {
      const recs: Record<string, Rec> = {};
      for (const id of this.ids(table)) recs[id] = this.get(table, id)!;
      out[table] = recs;
    }
    return out;
  }
}
