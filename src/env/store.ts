// A database of named tables of JSON records with copy-on-write episodes. The base (the domain's initial
// data) is deep-frozen and shared by every environment; an episode only holds the records it changed, so
// reset, snapshot and the canonical hash cost O(changes) (per-record hashes of the base are cached).
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
      this.hashes.set(name, new Map());
    }
    this.tables = tables;
    this.order = order;
    this.tableNames = [...tables.keys()].sort();
  }

  private sum: [number, number] | null = null;

  /** One record's contribution to the database hash, as two 32-bit lanes. */
  term(table: string, id: string, recordHash: string): [number, number] {
    const h = hash64(table + '\u0000' + id + '\u0000' + recordHash);
    return [parseInt(h.slice(0, 8), 16), parseInt(h.slice(8), 16)];
  }

  /** Sum of the terms of every base record (computed once). */
  termSum(): [number, number] {
    if (!this.sum) {
      let lo = 0;
      let hi = 0;
      for (const table of this.tableNames) {
        for (const id of this.order.get(table)!) {
          const [a, b] = this.term(table, id, this.baseHash(table, id));
          lo = (lo + a) >>> 0;
          hi = (hi + b) >>> 0;
        }
      }
      this.sum = [lo, hi];
    }
    return this.sum;
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
   * Canonical hash of the whole database. Each record contributes term(table, id, hash of its canonical
   * JSON), a 64-bit value; the database hash mixes the sum of all terms (two 32-bit lanes, mod 2^32). A sum
   * does not depend on key or record order, and it updates in O(changes): base sum - base terms of the
   * changed records + their new terms. Equal databases hash equal; any changed value changes the hash
   * (up to 64-bit collisions).
   */
  hash(): string {
    let [lo, hi] = this.base.termSum();
    for (const [table, recs] of this.overlay) {
      for (const [id, [, h]] of recs) {
        const [blo, bhi] = this.base.term(table, id, this.base.baseHash(table, id));
        const [nlo, nhi] = this.base.term(table, id, h);
        lo = (lo - blo + nlo) >>> 0;
        hi = (hi - bhi + nhi) >>> 0;
      }
    }
    return hash64(lo.toString(16) + ':' + hi.toString(16));
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
