//! What can go wrong when calling the model (`LlmError`), and why a model
//! stopped (`FinishReason`).

use std::fmt;

use crate::error::Error;

/// Why the model stopped writing (`finish_reason` of the chat completion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A final answer (`stop`).
    Stop,
    /// It asked for tool calls (`tool_calls`, or the older `function_call`).
    ToolCalls,
    /// It reached its output token limit (`length`): the answer is cut off.
    Length,
    /// The provider's content filter stopped it (`content_filter`).
    ContentFilter,
    /// A reason this SDK does not know.
    Other(String),
}

impl FinishReason {
    /// Reads the wire value.
    pub(crate) fn parse(value: &str) -> Self {
        match value {
            "stop" => FinishReason::Stop,
            "tool_calls" | "function_call" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The wire value.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

/// Why calling the model failed. Returned from a turn (inside
/// [`Error::Llm`]), it ends the turn with a TURN_ERROR carrying its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmError {
    /// The configuration is missing or invalid (an environment variable...).
    Config(String),
    /// The provider refused the API key (HTTP 401 or 403).
    KeyRefused {
        /// 401 or 403.
        status: u16,
        /// The provider's message.
        message: String,
    },
    /// The provider kept answering 429 Too Many Requests.
    RateLimited {
        /// How many requests were made.
        attempts: u32,
        /// The provider's last message, and why the SDK stopped retrying.
        message: String,
    },
    /// The provider answered with another error status (5xx, 400, 404...).
    Provider {
        /// The status.
        status: u16,
        /// The provider's message (`error.message` of its JSON body, else the body's text).
        message: String,
    },
    /// The provider reported an error inside its response stream.
    StreamError(String),
    /// The response stream is not what an OpenAI-compatible API sends.
    MalformedStream(String),
    /// The model stopped without a usable answer (`length`, `content_filter`).
    Stopped(FinishReason),
    /// A declared model (`[llm.<alias>]`) failed: every alias tried failed
    /// before its first token, or one failed after it (the host's words).
    Declared(String),
    /// The model still asked for tools after this many rounds (the
    /// [`ChatLoop`](super::ChatLoop)'s `max_rounds`).
    TooManyRounds(u32),
}

impl fmt::Display for LlmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LlmError::Config(m) => write!(f, "cannot call the model: {m}"),
            LlmError::KeyRefused { status, message } => write!(
                f,
                "the model provider refused the API key (HTTP {status}): {message}; \
                 check the OPENAI_API_KEY secret (PUT /secrets/OPENAI_API_KEY)"
            ),
            LlmError::RateLimited { attempts, message } => write!(
                f,
                "the model provider is rate limiting this agent (HTTP 429 to each of \
                 {attempts} attempts): {message}"
            ),
            LlmError::Provider { status, message } => {
                write!(f, "the model provider answered HTTP {status}: {message}")
            }
            LlmError::StreamError(m) => write!(
                f,
                "the model provider reported an error in its response stream: {m}"
            ),
            LlmError::MalformedStream(m) => {
                write!(f, "the model's response stream is malformed: {m}")
            }
            LlmError::Stopped(FinishReason::Length) => f.write_str(
                "the model's answer was cut off: it reached its output token limit \
                 (finish_reason `length`)",
            ),
            LlmError::Stopped(FinishReason::ContentFilter) => f.write_str(
                "the provider's content filter stopped the model's answer \
                 (finish_reason `content_filter`)",
            ),
            LlmError::Stopped(other) => write!(
                f,
                "the model stopped without an answer (finish_reason `{}`)",
                other.as_str()
            ),
            LlmError::Declared(m) => write!(f, "the declared model failed: {m}"),
            LlmError::TooManyRounds(max) => write!(
                f,
                "the model did not give a final answer within {max} rounds of tool calls \
                 (ChatLoop::max_rounds)"
            ),
        }
    }
}

impl std::error::Error for LlmError {}

impl From<LlmError> for Error {
    fn from(e: LlmError) -> Self {
        Error::Llm(e)
    }
}
