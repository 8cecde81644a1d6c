"""agenthost: write agenthost agents in Python.

An agent declares its routes, its tools and its handler on an
:class:`Agent`; the handler runs one turn of a session with a
:class:`Turn`, which streams messages, reads the session's history and
runs tools. ``agenthost deploy`` builds the project's ``app.py`` into a
component with componentize-py and uploads it.

::

    from agenthost import Agent, Turn

    agent = Agent(routes=["/chat"])

    @agent.handler
    def handle(turn: Turn) -> None:
        turn.say(f"Hello, {turn.input_text or 'world'}!")

Every turn runs in a fresh instance started from the snapshot taken when
the component was built: nothing a turn changes in memory survives into
the next one, so an agent keeps its context in the session's journal (what
it writes) and reads it back with :meth:`Turn.history`.

:mod:`agenthost.http` sends outbound HTTP requests (to the origins the
deployment's ``[outbound] allow`` lists), and :class:`agenthost.llm.ChatLoop`
runs a model loop over an OpenAI-compatible chat completions API with the
agent's tools.
"""

from .agent import Agent
from .errors import AgentError, BadInput, HostError, ToolApprovalRequired
from .history import ChatMessage, EndUser, Event, History
from .mcp import McpTool
from .message import Message
from .tools import ToolCall, ToolResult, ToolStatus
from .turn import Decision, Turn

__all__ = [
    "Agent",
    "AgentError",
    "BadInput",
    "ChatMessage",
    "Decision",
    "EndUser",
    "Event",
    "History",
    "HostError",
    "McpTool",
    "Message",
    "ToolApprovalRequired",
    "ToolCall",
    "ToolResult",
    "ToolStatus",
    "Turn",
]

__version__ = "0.1.0"
