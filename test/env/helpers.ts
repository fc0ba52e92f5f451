// Shared fixtures for the env tests: the real retail database and finders over it, so tests pick their
// cases from the data by property instead of hard-coding ids they did not check.

import { expect } from 'vitest';
import type { Observation } from '../../src/env/domain';
import type { Environment } from '../../src/env/env';
import { retailEnvFactory } from '../../src/env/retail/index';
import { loadRetailBase } from '../../src/env/retail/node';
import type { Order, Product, User } from '../../src/env/retail/types';

export const base = loadRetailBase();
export const fresh = retailEnvFactory(base);

export const orders = () => [...base.tables.get('orders')!.values()] as unknown as Order[];
export const users = () => [...base.tables.get('users')!.values()] as unknown as User[];
export const products = () => [...base.tables.get('products')!.values()] as unknown as Product[];
export const userOf = (o: Order) => base.tables.get('users')!.get(o.user_id) as unknown as User;
export const productOf = (id: string) => base.tables.get('products')!.get(id) as unknown as Product;

export function findOrder(pred: (o: Order, u: User) => boolean): Order {
  const o = orders().find((x) => pred(x, userOf(x)));
  if (!o) throw new Error('no order in the data matches the fixture predicate');
  return o;
}

/** Runs a call and checks that it failed with exactly `msg` and left the database unchanged. */
export function expectError(env: Environment, name: string, args: Record<string, unknown>, msg: string): void {
  const before = env.hash();
  const o = env.execute({ name, arguments: args });
  expect(o).toMatchObject({ ok: false, name, error: msg });
  expect(env.hash()).toBe(before);
}

export function expectOk<T = unknown>(env: Environment, name: string, args: Record<string, unknown>): T {
  const o: Observation = env.execute({ name, arguments: args });
  if (!o.ok) throw new Error(`${name} failed: ${o.error}`);
  return o.result as T;
}
