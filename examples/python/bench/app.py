"""bench: `agenthost bench`'s agent (docs/bench.md) in Python, the same
routes and behaviour as `examples/bench`, so the two languages are measured
by the same client: `agenthost bench --app bench-py`.

- `/stream`: input `{"deltas": N}` (default 50, at most 999 000) streams N
  deltas of `"tok "` as assistant messages (at most 100 000 per message),
  then the turn ends.
- `/approve`: one call of `gated_noop`, gated in code, so the turn
  suspends; the resumed turn (the SDK ran the call before the handler)
  says `done`.
"""

from agenthost import Agent, ToolCall, Turn

DEFAULT_DELTAS = 50
MAX_DELTAS = 999_000
DELTAS_PER_MESSAGE = 100_000

agent = Agent(routes=["/stream", "/approve"])


@agent.tool(needs_approval=True)
def gated_noop() -> dict:
    """Does nothing, after a human approved it."""
    return {"ok": True}


def stream(turn: Turn) -> None:
    deltas = turn.input.get("deltas") if isinstance(turn.input, dict) else None
    if not isinstance(deltas, int) or isinstance(deltas, bool) or deltas < 0:
        deltas = DEFAULT_DELTAS
    left = min(deltas, MAX_DELTAS)
    while left > 0:
        with turn.message() as message:
            for _ in range(min(left, DELTAS_PER_MESSAGE)):
                message.write("tok ")
        left -= DELTAS_PER_MESSAGE


def approve(turn: Turn) -> None:
    if turn.resumed is None:
        turn.run_tools([ToolCall("gated_noop", {})], reason="the benchmark asks for a decision")
    turn.say("done")


@agent.handler
def handle(turn: Turn) -> None:
    (approve if turn.route == "/approve" else stream)(turn)
