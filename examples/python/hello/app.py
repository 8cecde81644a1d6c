"""hello: a deterministic chat agent on `/chat` that echoes its input word by
word, remembers, through the session's journal, what was said before, and
says whom it serves (the session's end user) when asked "who am i".

The same agent as `examples/hello` (Rust), in Python.
"""

import json

from agenthost import Agent, Turn

agent = Agent(routes=["/chat"])


@agent.tool
def word_count(text: str = "") -> int:
    """Counts the words of `text`."""
    return len(text.split())


@agent.handler
def handle(turn: Turn) -> None:
    text = turn.input_text
    if text is None:
        raise ValueError("send text as the input")
    # The rule: an input that starts with "what did I say" (in any case)
    # is answered from the journal instead of echoed.
    if text.lower().startswith("what did i say"):
        return recall(turn)
    # And an input of exactly "who am i" is answered with the end user.
    if text == "who am i":
        return whoami(turn)
    with turn.message() as reply:
        reply.write("You said:")
        for word in text.split():
            reply.write(f" {word}")


def recall(turn: Turn) -> None:
    """Answers with the user's messages of earlier turns, oldest first."""
    said = [m.text for m in turn.history().messages() if m.role == "user"]
    said.pop()  # the last one is this very question
    if not said:
        return turn.say("You have not said anything before.")
    turn.say("Before, you said: " + ", ".join(json.dumps(s, ensure_ascii=False) for s in said))


def whoami(turn: Turn) -> None:
    """Answers with the session's end user and their email claim, if any."""
    user = turn.end_user()
    if user is None:
        return turn.say("You are anonymous.")
    email = user.claims.get("email")
    turn.say(f"You are {user.id} ({email if isinstance(email, str) else 'no email'}).")
