"""assistant: a customer-service agent on `/chat` driven by a model through
the SDK's model loop (`ChatLoop`), an OpenAI-compatible chat completions
API configured by the secrets `OPENAI_BASE_URL`, `OPENAI_API_KEY` and
`OPENAI_MODEL`. The same agent as `examples/assistant` (Rust), in Python.

Tools (each takes `{"order_id": "<id>"}`):
- `lookup_order`: safe; returns the order's canned record (see `ORDERS`),
  or fails with `no order <id>`. Deterministic, no network.
- `refund_order`: gated in code (`needs_approval=True`): each call waits
  for a human decision. Returns `{"refunded": id, "amount": total}`, or
  fails with `no order <id>` or `order <id> is not paid`.

Everything else (the conversation, streaming, tool steps, resuming after a
decision) is `ChatLoop.run`.
"""

from dataclasses import dataclass
from typing import Annotated

from agenthost import Agent, Turn
from agenthost.llm import ChatLoop

SYSTEM_PROMPT = (
    "You are the customer-service assistant of Tidy Kettle, a small online shop. "
    "Answer briefly. Use lookup_order to find an order before you talk about it. "
    "Use refund_order only when the customer asks for a refund of an order that is paid: "
    "a person approves or denies each refund, and if it is denied, say so."
)


@dataclass(frozen=True)
class Order:
    id: str
    item: str
    total: str
    status: str
    """`shipped`, `delivered` or `awaiting payment` (not paid: no refund)."""


ORDERS = [
    Order("A1001", "Blue kettle", "39.90 EUR", "shipped"),
    Order("A1002", "Tea towel, 2 pack", "12.50 EUR", "delivered"),
    Order("A1003", "Kettle descaler", "6.00 EUR", "awaiting payment"),
]

OrderId = Annotated[str, "The order's id, such as A1001."]

agent = Agent(routes=["/chat"])
loop = ChatLoop(SYSTEM_PROMPT)


def find(order_id: str) -> Order:
    """The order `order_id` names (case-insensitive)."""
    for order in ORDERS:
        if order.id.lower() == order_id.strip().lower():
            return order
    raise LookupError(f"no order {order_id}")


@agent.tool
def lookup_order(order_id: OrderId) -> dict:
    """Looks up an order by id: its item, total and status."""
    order = find(order_id)
    return {"order_id": order.id, "item": order.item, "total": order.total, "status": order.status}


@agent.tool(needs_approval=True)
def refund_order(order_id: OrderId) -> dict:
    """Refunds a paid order in full. A person approves each refund first."""
    order = find(order_id)
    if order.status == "awaiting payment":
        raise ValueError(f"order {order.id} is not paid")
    return {"refunded": order.id, "amount": order.total}


@agent.handler
def handle(turn: Turn) -> None:
    loop.run(turn)
