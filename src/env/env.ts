// An executable environment: a domain's tools over a copy-on-write store. execute() treats the call as
// untrusted input (it may come straight from a model): unknown tools and schema violations become error
// observations before any tool code runs, domain failures become error observations with the upstream
// text, and an unexpected exception becomes an 'internal' error observation. It never throws, and a call
// that fails leaves the database exactly as it was (the store's transaction is discarded).

import type { Observation, ToolCall, ToolDefinition, ToolSpec } from './domain';
import { ToolError, toolDefinitions } from './domain';
import { validate } from './schema';
import { BaseData, Store, type Overlay, type Rec } from './store';

export class Environment {
  readonly store: Store;
  private readonly byName: Map<string, ToolSpec>;

  constructor(
    base: BaseData,
    readonly tools: readonly ToolSpec[],
  ) {
    this.store = new Store(base);
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  definitions(): ToolDefinition[] {
    return toolDefinitions(this.tools);
  }

  tool(name: string): ToolSpec | undefined {
    return this.byName.get(name);
  }

  /**
   * The checks that need no state: the call's shape, that its tool exists, its arguments against the schema.
   * An error observation when one fails (the call can have no effect, on any database), null when it passes.
   */
  staticError(call: unknown): (Observation & { ok: false }) | null {
    if (call === null || typeof call !== 'object' || Array.isArray(call)) {
      return { ok: false, name: '', error: 'a tool call must be an object with "name" and "arguments"', code: 'parse' };
    }
    const c = call as Record<string, unknown>;
    if (typeof c.name !== 'string') return { ok: false, name: '', error: 'the tool call has no "name" string', code: 'parse' };
    const name = c.name.length > 100 ? c.name.slice(0, 100) + '…' : c.name;
    const tool = this.byName.get(c.name);
    if (!tool) return { ok: false, name, error: `Tool '${name}' not found.`, code: 'unknown_tool' };
    const bad = validate(tool.parameters, Object.hasOwn(c, 'arguments') ? c.arguments : {});
    return bad ? { ok: false, name, error: bad, code: 'invalid_arguments' } : null;
  }

  /** Executes one call; `call` may be any value (it is checked here). */
  execute(call: unknown): Observation {
    let name = '';
    try {
      const bad = this.staticError(call);
      if (bad) return bad;
      const c = call as { name: string; arguments?: unknown };
      name = c.name;
      const tool = this.byName.get(c.name)!;
      const args = Object.hasOwn(c, 'arguments') ? c.arguments : {};
      const result = this.store.transaction((tx) => tool.run(tx, args as Record<string, unknown>));
      return { ok: true, name, result };
    } catch (e) {
      if (e instanceof ToolError) return { ok: false, name, error: e.message, code: 'tool' };
      const msg = e instanceof Error ? e.message : String(e);
      return { ok: false, name, error: `internal error: ${msg}`, code: 'internal' };
    }
  }

  /** Executes a parsed call (the typed form used by replay and the expert). */
  run(call: ToolCall): Observation {
    return this.execute(call);
  }

  isWrite(name: string): boolean {
    return this.byName.get(name)?.kind === 'write';
  }

  hash(): string {
    return this.store.hash();
  }

  reset(): void {
    this.store.reset();
  }

  snapshot(): Overlay {
    return this.store.snapshot();
  }

  restore(s: Overlay): void {
    this.store.restore(s);
  }

  changed(): Record<string, Record<string, Rec>> {
    return this.store.changed();
  }
}
