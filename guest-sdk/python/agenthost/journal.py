"""The journal as a guest reads it: every event type's name and its
payload's fields (docs/events.md). Generated from the host's event payload types (host/src/journal/payloads.rs) by `cargo test -p agenthost --lib guest_journal`: do not edit; `UPDATE_GOLDEN=1` rewrites it.
"""

from typing import Any, List, Optional, TypedDict

try:
    from typing import NotRequired
except ImportError:  # Python < 3.11
    NotRequired = Optional  # type: ignore

SESSION_CREATED = "SESSION_CREATED"
TURN_STARTED = "TURN_STARTED"
MESSAGE_START = "MESSAGE_START"
MESSAGE_DELTA = "MESSAGE_DELTA"
MESSAGE_END = "MESSAGE_END"
TOOL_CALL = "TOOL_CALL"
TOOL_RESULT = "TOOL_RESULT"
TOOL_APPROVAL_REQUIRED = "TOOL_APPROVAL_REQUIRED"
TOOL_APPROVAL_GRANTED = "TOOL_APPROVAL_GRANTED"
TOOL_APPROVAL_DENIED = "TOOL_APPROVAL_DENIED"
TURN_ERROR = "TURN_ERROR"
TURN_ENDED = "TURN_ENDED"
SESSION_ENDED = "SESSION_ENDED"
HTTP_REQUEST = "HTTP_REQUEST"
HTTP_REQUEST_DENIED = "HTTP_REQUEST_DENIED"
HTTP_RESPONSE = "HTTP_RESPONSE"
INPUT_QUEUED = "INPUT_QUEUED"
TURN_SCHEDULED = "TURN_SCHEDULED"
TURN_SCHEDULE_CANCELLED = "TURN_SCHEDULE_CANCELLED"
LLM_CALL = "LLM_CALL"
LLM_RESULT = "LLM_RESULT"
BUDGET_REACHED = "BUDGET_REACHED"


class SessionCreated(TypedDict):
    """`SESSION_CREATED`: always seq 0."""

    app: str
    """The app's slug."""
    app_id: str
    deployment_id: str
    deployment_version: int
    end_user: NotRequired[Optional[Any]]
    """The end user the session belongs to, when one created it (with the claims the app's `[end_users] claims` lets through)."""
    input: Any
    """The input exactly as the client sent it (`null` when omitted)."""
    route: str


class TurnStarted(TypedDict):
    """`TURN_STARTED`."""

    input: Any
    """The turn's input; for an approval decision, the suspended turn's input."""
    reason: Any
    turn: int


class MessageStart(TypedDict):
    """`MESSAGE_START`."""

    message_id: str
    """`msg_` and 32 hex digits."""
    role: str
    """One of `user`, `assistant`."""


class MessageDelta(TypedDict):
    """`MESSAGE_DELTA`."""

    delta: Any
    message_id: str


class MessageEnd(TypedDict):
    """`MESSAGE_END`."""

    incomplete: NotRequired[Optional[bool]]
    """Only when the host closed the message at the end of its turn: `true` if the turn failed, `false` if it ended normally."""
    message_id: str
    role: str
    """One of `user`, `assistant`."""
    text: str
    """The message's full text (its deltas, concatenated)."""


class ToolCall(TypedDict):
    """`TOOL_CALL`."""

    arguments: Any
    mcp_server: NotRequired[Optional[str]]
    """The `[mcp.<name>]` server whose tool this is (named `<server>__<tool>`): the host calls it and journals its result."""
    name: str
    tool_call_id: str


class ToolResult(TypedDict):
    """`TOOL_RESULT`."""

    name: str
    output: Any
    status: str
    """One of `ok`, `error`, `denied`."""
    tool_call_id: str


class ToolApprovalRequired(TypedDict):
    """`TOOL_APPROVAL_REQUIRED`: the turn is suspended; its last event."""

    arguments: Any
    expires_at: NotRequired[Optional[str]]
    """When the call is denied by `timeout` unless a human decided first (RFC 3339); absent when the approval may wait forever."""
    gated_by: List[str]
    """What gates the tool, in this order: `code`, `manifest`, `policy`."""
    name: str
    reason: NotRequired[Optional[str]]
    """The agent's explanation of the step."""
    tool_call_id: str


class ToolApprovalGranted(TypedDict):
    """`TOOL_APPROVAL_GRANTED`."""

    address_hash: NotRequired[Optional[str]]
    """Decided by a webhook's decision link: a keyed hash of the address it was used from (docs/webhooks.md, "Decision links")."""
    approver: str
    """Who decided: the request's `approver`, else the deciding key's name."""
    arguments: NotRequired[Any]
    """The arguments the human approved the call with, instead of the agent's: the tool runs with these. Absent when not edited."""
    key_id: str
    """The id of the API key that decided."""
    message: NotRequired[Optional[str]]
    """A note from the human to the agent."""
    name: str
    original_arguments: NotRequired[Any]
    """The agent's arguments, when the human edited them."""
    result: NotRequired[Any]
    """The result the human gave in place of the tool's: the tool is not run and the agent receives this as its output."""
    tool_call_id: str


class ToolApprovalDenied(TypedDict):
    """`TOOL_APPROVAL_DENIED`: the fields of `TOOL_APPROVAL_GRANTED` but the edits (`arguments`, `original_arguments`, `result`)."""

    address_hash: NotRequired[Optional[str]]
    """As in `TOOL_APPROVAL_GRANTED`."""
    approver: str
    key_id: str
    message: NotRequired[Optional[str]]
    """A note from the human to the agent, for example why it was denied."""
    name: str
    tool_call_id: str


class TurnError(TypedDict):
    """`TURN_ERROR`."""

    kind: str
    """One of `agent_error`, `panic`, `trap`, `deadline`, `cpu_limit`, `memory_limit`, `invalid_order`, `limit`, `unanswered_tool_call`, `multiple_gated_calls`, `storage`, `deployment_unavailable`, `missing_secret`, `host_restarted`, `cancelled`, `internal`, `output_limit`."""
    message: str
    """Human-readable, at most 4096 bytes."""
    turn: int


class TurnEnded(TypedDict):
    """`TURN_ENDED`."""

    turn: int


class SessionEnded(TypedDict):
    """`SESSION_ENDED`: the session's last event."""

    key_id: NotRequired[Optional[str]]
    """The key that ended it, with `reason`."""
    reason: NotRequired[Optional[str]]
    """Why an operator or client ended it (`POST /sessions/{id}/end`); absent when the agent ended it."""


class HttpRequest(TypedDict):
    """`HTTP_REQUEST`: committed before the request leaves."""

    method: str
    origin: str
    """`scheme://host[:port]`."""
    path: str
    """The path, without the query string, secrets redacted."""
    request_id: str
    """`http_<turn>_<n>`."""


class HttpRequestDenied(TypedDict):
    """`HTTP_REQUEST_DENIED`."""

    method: str
    origin: str
    path: str
    reason: str
    """Why the host refused."""
    request_id: str


class HttpResponse(TypedDict):
    """`HTTP_RESPONSE`: how a request that left ended."""

    bytes: int
    """Response body bytes the agent received."""
    duration_ms: float
    """From the commit of `HTTP_REQUEST` to the end, one decimal."""
    error: NotRequired[Optional[str]]
    """`null` when the body was read to its end."""
    request_id: str
    status: NotRequired[Optional[int]]
    """`null` when no response head arrived."""


class InputQueued(TypedDict):
    """`INPUT_QUEUED`: an input sent with `on_busy` `enqueue` or `interrupt` while the session was busy; it runs as a later turn of its own, whose TURN_STARTED carries it again (docs/api.md, "Input while a turn runs")."""

    input: Any
    """The input exactly as the client sent it."""
    input_id: str
    """`inq_` and 32 hex digits."""
    interrupt: NotRequired[bool]
    """`true` for `on_busy` `interrupt`: the running turn is cancelled and this input runs next, before inputs queued earlier."""
    position: int
    """Inputs queued before it runs, counted from 1 (1: it runs next)."""


class TurnScheduled(TypedDict):
    """`TURN_SCHEDULED`: the agent scheduled an input as a later turn of its session (`schedule` of `wit/agent.wit`); journaled in the turn's final commit, just before its TURN_ENDED (or TOOL_APPROVAL_REQUIRED), so only a turn that ends well schedules (docs/schedules.md)."""

    at: str
    """When it is due, RFC 3339 in UTC, to the millisecond."""
    input: Any
    """The input the later turn gets."""
    schedule_id: str
    """The schedule's id, as `GET /sessions/{id}/schedules` lists it and the TURN_STARTED it starts names it."""


class TurnScheduleCancelled(TypedDict):
    """`TURN_SCHEDULE_CANCELLED`: the agent cancelled a schedule of its session made before this turn (`cancel-schedule`); journaled in the turn's final commit, like TURN_SCHEDULED."""

    schedule_id: str


class LlmCall(TypedDict):
    """`LLM_CALL`: the host is about to send a completion request to a declared model (`[llm.<alias>]`, docs/llm.md); committed before the request leaves. Each request is its own LLM_CALL (a fallback's too), followed by its LLM_RESULT."""

    alias: str
    """The alias whose endpoint is called."""
    call_id: str
    """`llm_<turn>_<n>`."""
    model: str
    provider: str
    """`openai` or `anthropic`."""


class LlmResult(TypedDict):
    """`LLM_RESULT`: how the request of an LLM_CALL ended. What the model said is in the MESSAGE_* events it streamed into and the TOOL_CALLs the agent handed over."""

    call_id: str
    cost: NotRequired[Optional[float]]
    """In the unit of the alias's `price`, when it declares one."""
    error: NotRequired[Optional[str]]
    """Why the request failed (a status, a connection error, a cut stream)."""
    finish_reason: str
    """`stop`, `length`, `tool_calls`, `content_filter`, or `error`."""
    served_by: NotRequired[Optional[str]]
    """The alias that answered; absent when the request failed."""
    usage: Any


class BudgetReached(TypedDict):
    """`BUDGET_REACHED`: a declared-model call the LLM budget cannot cover; nothing was sent, and the turn ends here with the session `paused_budget` until the budget is raised (docs/llm.md "Budgets")."""

    call_id: NotRequired[Optional[str]]
    """The LLM_CALL id the refused request would have had."""
    limit: float
    needed: float
    """The refused call's worst case."""
    reserved: float
    """Held by calls not settled yet."""
    scope: str
    """`session` (the only scope so far)."""
    spent: float
    """Spent by settled calls (and worst cases of calls that never reported)."""
    unit: str
    """`tokens` or `cost`: the unit of the numbers below."""
