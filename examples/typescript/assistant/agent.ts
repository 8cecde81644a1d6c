/**
 * assistant: a customer-service agent on `/chat` driven by a model through
 * the SDK's model loop (`ChatLoop`), an OpenAI-compatible chat completions
 * API configured by the secrets `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
 * `OPENAI_MODEL`. The same agent as `examples/assistant` (Rust) and
 * `examples/python/assistant`, in TypeScript.
 *
 * Tools (each takes `{"order_id": "<id>"}`):
 * - `lookup_order`: safe; returns the order's canned record (see `ORDERS`),
 *   or fails with `no order <id>`. Deterministic, no network.
 * - `refund_order`: gated in code (`needsApproval: true`): each call waits
 *   for a human decision. Returns `{"refunded": id, "amount": total}`, or
 *   fails with `no order <id>` or `order <id> is not paid`.
 *
 * Everything else (the conversation, streaming, tool steps, resuming after a
 * decision) is `ChatLoop.run`.
 */

import { Agent, type JsonSchema } from '@agenthost/sdk';
import { ChatLoop } from '@agenthost/sdk/llm';

const SYSTEM_PROMPT =
  'You are the customer-service assistant of Tidy Kettle, a small online shop. ' +
  'Answer briefly. Use lookup_order to find an order before you talk about it. ' +
  'Use refund_order only when the customer asks for a refund of an order that is paid: ' +
  'a person approves or denies each refund, and if it is denied, say so.';

interface Order {
  id: string;
  item: string;
  total: string;
  /** `shipped`, `delivered` or `awaiting payment` (not paid: no refund). */
  status: 'shipped' | 'delivered' | 'awaiting payment';
}

const ORDERS: Order[] = [
  { id: 'A1001', item: 'Blue kettle', total: '39.90 EUR', status: 'shipped' },
  { id: 'A1002', item: 'Tea towel, 2 pack', total: '12.50 EUR', status: 'delivered' },
  { id: 'A1003', item: 'Kettle descaler', total: '6.00 EUR', status: 'awaiting payment' },
];

/** The arguments of both tools. */
interface OrderArgs {
  order_id: string;
}

const ORDER_ID: JsonSchema = {
  type: 'object',
  properties: { order_id: { type: 'string', description: "The order's id, such as A1001." } },
  required: ['order_id'],
  additionalProperties: false,
};

/** The order `orderId` names (case-insensitive). */
function find(orderId: string): Order {
  const order = ORDERS.find((o) => o.id.toLowerCase() === orderId.trim().toLowerCase());
  if (!order) {
    throw new Error(`no order ${orderId}`);
  }
  return order;
}

const agent = new Agent({ routes: ['/chat'] });
const loop = new ChatLoop(SYSTEM_PROMPT);

agent.tool({
  name: 'lookup_order',
  description: 'Looks up an order by id: its item, total and status.',
  parameters: ORDER_ID,
  run: ({ order_id }: OrderArgs) => {
    const order = find(order_id);
    return { order_id: order.id, item: order.item, total: order.total, status: order.status };
  },
});

agent.tool({
  name: 'refund_order',
  description: 'Refunds a paid order in full. A person approves each refund first.',
  parameters: ORDER_ID,
  needsApproval: true,
  run: ({ order_id }: OrderArgs) => {
    const order = find(order_id);
    if (order.status === 'awaiting payment') {
      throw new Error(`order ${order.id} is not paid`);
    }
    return { refunded: order.id, amount: order.total };
  },
});

agent.handler((turn) => loop.run(turn));

export default agent;
