// Read and generic retail tools: success paths and every error condition upstream has.

import { describe, expect, it } from 'vitest';
import type { Order, Product, User } from '../../src/env/retail/types';
import { ORDER_OPTIONAL_FIELDS } from '../../src/env/retail/types';
import { expectError, expectOk, fresh, orders, products, users } from './helpers';

describe('find_user_id_by_email', () => {
  it('finds a user case-insensitively', () => {
    const u = users()[7];
    expect(expectOk(fresh(), 'find_user_id_by_email', { email: u.email.toUpperCase() })).toBe(u.user_id);
  });
  it('fails on unknown or padded emails (no trimming)', () => {
    const env = fresh();
    expectError(env, 'find_user_id_by_email', { email: 'nobody@example.com' }, 'User not found');
    expectError(env, 'find_user_id_by_email', { email: ' ' + users()[7].email }, 'User not found');
  });
});

describe('find_user_id_by_name_zip', () => {
  it('matches names case-insensitively and the zip exactly', () => {
    expect(expectOk(fresh(), 'find_user_id_by_name_zip', { first_name: 'yusuf', last_name: 'ROSSI', zip: '19122' })).toBe(
      'yusuf_rossi_9620',
    );
  });
  it('fails on a wrong zip or name', () => {
    const env = fresh();
    expectError(env, 'find_user_id_by_name_zip', { first_name: 'Yusuf', last_name: 'Rossi', zip: '19123' }, 'User not found');
    expectError(env, 'find_user_id_by_name_zip', { first_name: 'Yusu', last_name: 'Rossi', zip: '19122' }, 'User not found');
  });
});

describe('get_user_details', () => {
  it('returns the whole user record', () => {
    const u = expectOk<User>(fresh(), 'get_user_details', { user_id: 'yusuf_rossi_9620' });
    expect(u.name).toEqual({ first_name: 'Yusuf', last_name: 'Rossi' });
    expect(u.orders).toContain('#W2378156');
    expect(Object.keys(u.payment_methods)).toEqual(['credit_card_9513926']);
  });
  it('fails on an unknown id, including prototype names', () => {
    const env = fresh();
    for (const id of ['yusuf_rossi_962', '__proto__', 'constructor', 'toString']) expectError(env, 'get_user_details', { user_id: id }, 'User not found');
  });
});

describe('get_order_details', () => {
  it('returns the order with the seven optional fields as null', () => {
    const o = expectOk<Order>(fresh(), 'get_order_details', { order_id: '#W2378156' });
    expect(o.status).toBe('delivered');
    expect(o.fulfillments[0].tracking_id).toEqual(['843053632392']);
    for (const f of ORDER_OPTIONAL_FIELDS) expect(o[f]).toBeNull();
    expect(Object.keys(o).slice(-7)).toEqual([...ORDER_OPTIONAL_FIELDS]);
  });
  it("fails without '#', without 'W', or in lower case", () => {
    const env = fresh();
    for (const id of ['W2378156', '#2378156', '#w2378156', '2378156']) expectError(env, 'get_order_details', { order_id: id }, 'Order not found');
  });
});

describe('get_product_details', () => {
  it('returns the product with its variants', () => {
    const p = expectOk<Product>(fresh(), 'get_product_details', { product_id: '1656367028' });
    expect(p.name).toBe('Mechanical Keyboard');
    expect(p.variants['7706410293']).toMatchObject({ available: true, price: 269.16 });
  });
  it('fails on an item id and on an unknown id', () => {
    const env = fresh();
    expectError(env, 'get_product_details', { product_id: '7706410293' }, 'Product not found');
    expectError(env, 'get_product_details', { product_id: '0' }, 'Product not found');
  });
});

describe('list_all_product_types', () => {
  it('lists 50 names sorted by code point, Python dict layout', () => {
    const s = expectOk<string>(fresh(), 'list_all_product_types', {});
    expect(s.startsWith('{"Action Camera": "3377618313", "Air Purifier": "3821016478", ')).toBe(true);
    const m = JSON.parse(s) as Record<string, string>;
    const names = Object.keys(m);
    expect(names.length).toBe(50);
    expect(names.indexOf('E-Reader')).toBeLessThan(names.indexOf('Electric Kettle'));
    expect(names.indexOf('LED Light Bulb')).toBeLessThan(names.indexOf('Laptop'));
    for (const p of products()) expect(m[p.name]).toBe(p.product_id);
  });
});

describe('transfer_to_human_agents', () => {
  it('always succeeds without a state change', () => {
    const env = fresh();
    const h = env.hash();
    expect(expectOk(env, 'transfer_to_human_agents', { summary: 'wants a human' })).toBe('Transfer successful');
    expect(env.hash()).toBe(h);
  });
});

describe('data facts the tools rely on', () => {
  it('has the documented counts', () => {
    expect(orders().length).toBe(1000);
    expect(users().length).toBe(500);
    expect(products().length).toBe(50);
  });
});
