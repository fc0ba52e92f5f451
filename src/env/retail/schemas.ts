// JSON-schema definitions of the retail tools (OpenAI function format via toolDefinitions()). Names and
// argument names are upstream's; descriptions are ours and kept short, because they go into every prompt of
// a small model. Length caps bound untrusted input; upstream has none, but no real id or address is close.

import type { JsonSchema, ToolKind, ToolSpec } from '../domain';

const str = (description: string, maxLength = 200): JsonSchema => ({ type: 'string', description, maxLength });
const ids = (description: string): JsonSchema => ({
  type: 'array',
  description,
  items: { type: 'string', maxLength: 40 },
  maxItems: 20,
});

function obj(properties: Record<string, JsonSchema>): JsonSchema {
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
}

const ORDER_ID = str("The order id, with the leading '#', e.g. '#W0000000'.", 40);
const USER_ID = str("The user id, e.g. 'sara_doe_1234'.", 80);
const PAYMENT_ID = str("A payment method id of the order's owner, e.g. 'gift_card_0000000'.", 40);
const ADDRESS = {
  address1: str('First address line.'),
  address2: str('Second address line (may be empty).'),
  city: str('City.'),
  state: str('State, e.g. NY.'),
  country: str('Country, e.g. USA.'),
  zip: str('Zip code.', 20),
};

type Schema = Omit<ToolSpec, 'run'>;

const tool = (name: string, kind: ToolKind, description: string, properties: Record<string, JsonSchema>): Schema => ({
  name,
  kind,
  description,
  parameters: obj(properties),
});

export const RETAIL_SCHEMAS: readonly Schema[] = [
  tool('find_user_id_by_email', 'read', 'Find a user id from an email address (case-insensitive).', {
    email: str('The email address.'),
  }),
  tool('find_user_id_by_name_zip', 'read', 'Find a user id from first name, last name and zip code.', {
    first_name: str('First name.', 100),
    last_name: str('Last name.', 100),
    zip: str('Zip code of the default address.', 20),
  }),
  tool('get_user_details', 'read', 'Get a user: name, address, email, payment methods, order ids.', { user_id: USER_ID }),
  tool('get_order_details', 'read', 'Get an order: status, items, address, fulfillments, payments.', { order_id: ORDER_ID }),
  tool('get_product_details', 'read', 'Get a product type and all its variants (item ids, options, availability, price).', {
    product_id: str('The product id (not an item id).', 40),
  }),
  tool('list_all_product_types', 'read', 'List every product type name with its product id.', {}),
  tool('calculate', 'generic', 'Evaluate an arithmetic expression (digits, + - * / ( ) . and spaces); result rounded to 2 decimals.', {
    expression: str('The expression, e.g. "2 * (3.5 + 1)".', 1000),
  }),
  tool('transfer_to_human_agents', 'generic', 'Transfer the user to a human agent, with a summary of the issue.', {
    summary: str('A summary of the user issue.', 4000),
  }),
  tool('cancel_pending_order', 'write', 'Cancel a pending order. Refunds go to the original payment methods.', {
    order_id: ORDER_ID,
    reason: str("Either 'no longer needed' or 'ordered by mistake'.", 100),
  }),
  tool('modify_pending_order_address', 'write', 'Change the shipping address of a pending order.', {
    order_id: ORDER_ID,
    ...ADDRESS,
  }),
  tool(
    'modify_pending_order_items',
    'write',
    'Change items of a pending order to other available variants of the same product (once per order).',
    {
      order_id: ORDER_ID,
      item_ids: ids('Item ids to change.'),
      new_item_ids: ids('New item ids, position by position.'),
      payment_method_id: PAYMENT_ID,
    },
  ),
  tool('modify_pending_order_payment', 'write', 'Change the payment method of a pending order.', {
    order_id: ORDER_ID,
    payment_method_id: PAYMENT_ID,
  }),
  tool('modify_user_address', 'write', "Change a user's default address.", { user_id: USER_ID, ...ADDRESS }),
  tool(
    'return_delivered_order_items',
    'write',
    'Request a return of items of a delivered order; refund to the original method or a gift card.',
    { order_id: ORDER_ID, item_ids: ids('Item ids to return.'), payment_method_id: PAYMENT_ID },
  ),
  tool(
    'exchange_delivered_order_items',
    'write',
    'Request an exchange of items of a delivered order for available variants of the same product.',
    {
      order_id: ORDER_ID,
      item_ids: ids('Item ids to exchange.'),
      new_item_ids: ids('New item ids, position by position.'),
      payment_method_id: PAYMENT_ID,
    },
  ),
];
