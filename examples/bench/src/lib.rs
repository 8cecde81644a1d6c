//! bench: the load generator's agent for `agenthost bench` (docs/bench.md).
//!
//! Routes:
//! - `/stream`: input `{"deltas": N}` (default 50, at most 999 000) streams
//!   N deltas of `"tok "` as assistant messages, then the turn ends. One
//!   message holds at most 100 000 deltas (a message's text is capped at
//!   1 MiB), so N up to 100 000 is exactly one message.
//! - `/approve`: the turn makes one call of `gated_noop`, gated in code, so
//!   it suspends with `TOOL_APPROVAL_REQUIRED`; in the resumed turn the SDK
//!   runs the call (approved or denied) before `handle`, which says `done`.

use agenthost_sdk::serde_json::{Value, json};
use agenthost_sdk::{Agent, Error, Setup, ToolCall, Turn};

/// Deltas when the input does not say.
const DEFAULT_DELTAS: u64 = 50;
/// The most deltas one turn streams: with the messages' starts and ends it
/// stays within the manifest's `max_events` (1 000 000).
const MAX_DELTAS: u64 = 999_000;
/// Deltas per message: 100 000 × 4 bytes stays under the 1 MiB message cap.
const DELTAS_PER_MESSAGE: u64 = 100_000;

struct Bench;

impl Agent for Bench {
    fn setup(agent: &mut Setup) {
        agent.route("/stream").route("/approve");
        let schema = json!({"type": "object", "properties": {}});
        agent
            .tool(
                "gated_noop",
                "Does nothing, after a human approved it.",
                schema,
                gated_noop,
            )
            .needs_approval();
    }

    fn handle(turn: &mut Turn) -> Result<(), Error> {
        match turn.route() {
            "/approve" => approve(turn),
            _ => stream(turn),
        }
    }
}

/// `/stream`: N deltas, one message per `DELTAS_PER_MESSAGE`.
fn stream(turn: &mut Turn) -> Result<(), Error> {
    let deltas = turn.input()["deltas"]
        .as_u64()
        .unwrap_or(DEFAULT_DELTAS)
        .min(MAX_DELTAS);
    let mut left = deltas;
    while left > 0 {
        let mut message = turn.message()?;
        for _ in 0..left.min(DELTAS_PER_MESSAGE) {
            message.write("tok ")?;
        }
        message.finish()?;
        left = left.saturating_sub(DELTAS_PER_MESSAGE);
    }
    Ok(())
}

/// `/approve`: one gated call; the decision resumes it in a new turn.
fn approve(turn: &mut Turn) -> Result<(), Error> {
    // On the turn resumed by the decision, the SDK has already run the call.
    if turn.resumed().is_some() {
        return turn.say("done");
    }
    let call = ToolCall::new("gated_noop", json!({}));
    // Suspension (`ToolApprovalRequired`) propagates: the turn ends cleanly.
    turn.run_tools_with_reason(vec![call], "the benchmark asks for a decision")?;
    turn.say("done")
}

fn gated_noop(_: &mut Turn, _: Value) -> Result<Value, String> {
    Ok(json!({"ok": true}))
}

agenthost_sdk::export_agent!(Bench);
