//! assistant: a customer-service agent on `/chat` driven by a model through
//! the SDK's model loop ([`ChatLoop`]), an OpenAI-compatible chat
//! completions API configured by the secrets `OPENAI_BASE_URL`,
//! `OPENAI_API_KEY` and `OPENAI_MODEL`.
//!
//! Tools (each takes `{"order_id": "<id>"}`):
//! - `lookup_order`: safe; returns the order's canned record (see [`ORDERS`]),
//!   or fails with `no order <id>`. Deterministic, no network.
//! - `refund_order`: gated in code (`needs_approval`): each call waits for a
//!   human decision. Returns `{"refunded": id, "amount": total}`, or fails
//!   with `no order <id>` or `order <id> is not paid`.
//!
//! Everything else (the conversation, streaming, tool steps, resuming after
//! a decision) is [`ChatLoop::run`].

use agenthost_sdk::llm::ChatLoop;
use agenthost_sdk::serde_json::{Value, json};
use agenthost_sdk::{Agent, Error, Setup, Turn};

const SYSTEM_PROMPT: &str = "You are the customer-service assistant of Tidy Kettle, a \
small online shop. Answer briefly. Use lookup_order to find an order before you talk \
about it. Use refund_order only when the customer asks for a refund of an order that \
is paid: a person approves or denies each refund, and if it is denied, say so.";

/// One of the shop's orders.
pub struct Order {
    /// Such as `A1001`.
    pub id: &'static str,
    /// What was ordered.
    pub item: &'static str,
    /// What it cost.
    pub total: &'static str,
    /// `shipped`, `delivered` or `awaiting payment` (not paid: no refund).
    pub status: &'static str,
}

/// The shop's orders (canned: the same in every turn and session).
pub const ORDERS: &[Order] = &[
    Order {
        id: "A1001",
        item: "Blue kettle",
        total: "39.90 EUR",
        status: "shipped",
    },
    Order {
        id: "A1002",
        item: "Tea towel, 2 pack",
        total: "12.50 EUR",
        status: "delivered",
    },
    Order {
        id: "A1003",
        item: "Kettle descaler",
        total: "6.00 EUR",
        status: "awaiting payment",
    },
];

struct Assistant;

impl Agent for Assistant {
    fn setup(agent: &mut Setup) {
        agent.route("/chat");
        let schema = json!({
            "type": "object",
            "properties": {"order_id": {"type": "string", "description": "The order's id, such as A1001."}},
            "required": ["order_id"],
            "additionalProperties": false,
        });
        agent.tool(
            "lookup_order",
            "Looks up an order by id: its item, total and status.",
            schema.clone(),
            lookup_order,
        );
        agent
            .tool(
                "refund_order",
                "Refunds a paid order in full. A person approves each refund first.",
                schema,
                refund_order,
            )
            .needs_approval();
    }

    fn handle(turn: &mut Turn) -> Result<(), Error> {
        ChatLoop::new(SYSTEM_PROMPT).run(turn)
    }
}

/// The order `args.order_id` names (case-insensitive).
fn order(args: &Value) -> Result<&'static Order, String> {
    let id = args["order_id"].as_str().ok_or("missing order_id")?;
    ORDERS
        .iter()
        .find(|order| order.id.eq_ignore_ascii_case(id.trim()))
        .ok_or_else(|| format!("no order {id}"))
}

fn lookup_order(_: &mut Turn, args: Value) -> Result<Value, String> {
    let order = order(&args)?;
    Ok(json!({
        "order_id": order.id,
        "item": order.item,
        "total": order.total,
        "status": order.status,
    }))
}

fn refund_order(_: &mut Turn, args: Value) -> Result<Value, String> {
    let order = order(&args)?;
    if order.status == "awaiting payment" {
        return Err(format!("order {} is not paid", order.id));
    }
    Ok(json!({"refunded": order.id, "amount": order.total}))
}

agenthost_sdk::export_agent!(Assistant);
