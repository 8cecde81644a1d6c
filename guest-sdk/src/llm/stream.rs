//! Assembling a streamed chat completion: `Assembler` takes the `data:` of
//! each Server-Sent Event and yields the text deltas as they come, then the
//! whole `Completion` (text, tool calls put together from their fragments,
//! finish reason, usage).

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::{FinishReason, LlmError};

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ModelCall {
    /// The model's id for the call, if it sent one (the SDK journals its own).
    pub(crate) id: Option<String>,
    /// The tool's name.
    pub(crate) name: String,
    /// The arguments as the model wrote them (JSON text, unchecked).
    pub(crate) arguments: String,
}

/// Token counts from the stream's usage chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
}

/// One model response, put together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completion {
    pub(crate) text: String,
    pub(crate) tool_calls: Vec<ModelCall>,
    pub(crate) finish_reason: FinishReason,
    pub(crate) usage: Option<Usage>,
}

/// A tool call still arriving.
#[derive(Debug, Default)]
struct Partial {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Puts a streamed chat completion together, one `data:` payload at a time.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    text: String,
    calls: BTreeMap<u64, Partial>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
    chunks: usize,
}

/// What the host accepts as a tool name: 1 to 64 letters, digits, `_` or `-`.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The start of a chunk, for error messages.
fn excerpt(data: &str) -> String {
    let mut end = data.len().min(200);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    let more = if end < data.len() { "…" } else { "" };
    format!("{}{more}", &data[..end])
}

impl Assembler {
    /// Feeds one event's data. Returns the text the model added (often empty).
    pub(crate) fn feed(&mut self, data: &str) -> Result<String, LlmError> {
        if self.done {
            return Ok(String::new()); // nothing is expected after [DONE]
        }
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(String::new());
        }
        self.chunks += 1;
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::MalformedStream(format!(
                "chunk {} is not JSON ({e}): {}",
                self.chunks,
                excerpt(data)
            ))
        })?;
        let Some(chunk) = chunk.as_object() else {
            return Err(LlmError::MalformedStream(format!(
                "chunk {} is not a JSON object: {}",
                self.chunks,
                excerpt(data)
            )));
        };
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = error["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string());
            return Err(LlmError::StreamError(message));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
                completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            });
        }
        let choices = match chunk.get("choices") {
            None | Some(Value::Null) => return Ok(String::new()),
            Some(Value::Array(choices)) => choices,
            Some(_) => {
                return Err(LlmError::MalformedStream(format!(
                    "`choices` of chunk {} is not an array: {}",
                    self.chunks,
                    excerpt(data)
                )));
            }
        };
        // One completion was asked for (n = 1): its choice has index 0.
        let Some(choice) = choices
            .iter()
            .find(|c| c["index"].as_u64().unwrap_or(0) == 0)
        else {
            return Ok(String::new());
        };
        let mut added = String::new();
        let delta = &choice["delta"];
        for field in ["content", "refusal"] {
            if let Some(text) = delta[field].as_str() {
                added.push_str(text);
            }
        }
        if let Some(fragments) = delta["tool_calls"].as_array() {
            for fragment in fragments {
                self.tool_call_fragment(fragment)?;
            }
        } else if delta["function_call"].is_object() {
            // The pre-tools API: one call, in `function_call`.
            let legacy = serde_json::json!({"index": 0, "function": delta["function_call"]});
            self.tool_call_fragment(&legacy)?;
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(reason.to_owned());
        }
        self.text.push_str(&added);
        Ok(added)
    }

    /// One element of `delta.tool_calls`: the first fragment of a call
    /// brings its id and name, the next ones pieces of its arguments.
    fn tool_call_fragment(&mut self, fragment: &Value) -> Result<(), LlmError> {
        if !fragment.is_object() {
            return Err(LlmError::MalformedStream(format!(
                "a tool call fragment in chunk {} is not an object: {fragment}",
                self.chunks
            )));
        }
        let id = fragment["id"].as_str().filter(|id| !id.is_empty());
        let index = match fragment["index"].as_u64() {
            Some(index) => index,
            // Some servers leave `index` out: a new id starts a new call.
            None => {
                let last = self.calls.iter().next_back();
                match (last, id) {
                    (Some((&i, call)), Some(id)) if call.id.as_deref() == Some(id) => i,
                    (Some((&i, _)), None) => i,
                    (Some((&i, _)), Some(_)) => i + 1,
                    (None, _) => 0,
                }
            }
        };
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            call.id.get_or_insert_with(|| id.to_owned());
        }
        let function = &fragment["function"];
        if let Some(name) = function["name"].as_str()
            && call.name.is_empty()
        {
            call.name = name.to_owned();
        }
        if let Some(arguments) = function["arguments"].as_str() {
            call.arguments.push_str(arguments);
        }
        Ok(())
    }

    /// The whole completion, once the stream has ended.
    pub(crate) fn finish(self) -> Result<Completion, LlmError> {
        if self.chunks == 0 && !self.done {
            return Err(LlmError::MalformedStream(
                "no `data:` event arrived (an OpenAI-compatible stream sends \
                 `data: {\"choices\":[...]}` events, then `data: [DONE]`)"
                    .into(),
            ));
        }
        let finish_reason = match (self.finish_reason, self.done) {
            (Some(reason), _) => FinishReason::parse(&reason),
            // [DONE] without a finish_reason: go by what arrived.
            (None, true) if !self.calls.is_empty() => FinishReason::ToolCalls,
            (None, true) => FinishReason::Stop,
            (None, false) => {
                return Err(LlmError::MalformedStream(
                    "the stream ended before the model finished (no finish_reason, no [DONE])"
                        .into(),
                ));
            }
        };
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(LlmError::MalformedStream(format!(
                    "tool call {index} has no function name"
                )));
            }
            if !valid_tool_name(&call.name) {
                return Err(LlmError::MalformedStream(format!(
                    "tool call {index} names `{}`, which is not a tool name \
                     (1 to 64 letters, digits, _ or -)",
                    excerpt(&call.name)
                )));
            }
            tool_calls.push(ModelCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
            });
        }
        Ok(Completion {
            text: self.text,
            tool_calls,
            finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `chat.completion.chunk` as OpenAI streams it.
    fn chunk(delta: Value, finish_reason: Value) -> String {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "system_fingerprint": "fp",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
            "usage": null,
        })
        .to_string()
    }

    fn usage_chunk() -> String {
        json!({
            "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": [],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        })
        .to_string()
    }

    fn run(datas: &[String]) -> (Vec<String>, Result<Completion, LlmError>) {
        let mut assembler = Assembler::default();
        let mut deltas = Vec::new();
        for data in datas {
            match assembler.feed(data) {
                Ok(text) if text.is_empty() => {}
                Ok(text) => deltas.push(text),
                Err(e) => return (deltas, Err(e)),
            }
        }
        (deltas, assembler.finish())
    }

    #[test]
    fn text_streams_delta_by_delta() {
        let (deltas, completion) = run(&[
            chunk(
                json!({"role": "assistant", "content": "", "refusal": null}),
                json!(null),
            ),
            chunk(json!({"content": "Hello"}), json!(null)),
            chunk(json!({"content": ", world"}), json!(null)),
            chunk(json!({}), json!("stop")),
            usage_chunk(),
            "[DONE]".into(),
        ]);
        assert_eq!(deltas, vec!["Hello", ", world"]);
        let completion = completion.unwrap();
        assert_eq!(completion.text, "Hello, world");
        assert_eq!(completion.finish_reason, FinishReason::Stop);
        assert!(completion.tool_calls.is_empty());
        assert_eq!(
            completion.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 5
            })
        );
    }

    #[test]
    fn parallel_tool_calls_are_put_together_by_index() {
        let call = |index: u64, id: Option<&str>, name: Option<&str>, arguments: &str| {
            let mut fragment = json!({"index": index, "function": {"arguments": arguments}});
            if let Some(id) = id {
                fragment["id"] = json!(id);
                fragment["type"] = json!("function");
            }
            if let Some(name) = name {
                fragment["function"]["name"] = json!(name);
            }
            chunk(json!({"tool_calls": [fragment]}), json!(null))
        };
        let (deltas, completion) = run(&[
            chunk(json!({"role": "assistant", "content": null}), json!(null)),
            call(0, Some("call_a"), Some("lookup_order"), ""),
            call(0, None, None, "{\"order"),
            call(0, None, None, "_id\": \"A1"),
            call(1, Some("call_b"), Some("lookup_order"), ""),
            call(0, None, None, "\"}"),
            call(1, None, None, "{\"order_id\":\"B2\"}"),
            chunk(json!({}), json!("tool_calls")),
            usage_chunk(),
            "[DONE]".into(),
        ]);
        assert!(deltas.is_empty());
        let completion = completion.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            completion.tool_calls,
            vec![
                ModelCall {
                    id: Some("call_a".into()),
                    name: "lookup_order".into(),
                    arguments: "{\"order_id\": \"A1\"}".into(),
                },
                ModelCall {
                    id: Some("call_b".into()),
                    name: "lookup_order".into(),
                    arguments: "{\"order_id\":\"B2\"}".into(),
                },
            ]
        );
    }

    #[test]
    fn text_and_a_tool_call_in_one_response() {
        let (deltas, completion) = run(&[
            chunk(json!({"content": "Let me check."}), json!(null)),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                    "function": {"name": "lookup_order", "arguments": "{}"}}]}),
                json!(null),
            ),
            chunk(json!({}), json!("tool_calls")),
        ]);
        assert_eq!(deltas, vec!["Let me check."]);
        let completion = completion.unwrap();
        assert_eq!(completion.text, "Let me check.");
        assert_eq!(completion.tool_calls.len(), 1);
    }

    #[test]
    fn calls_without_an_index_start_at_each_new_id() {
        let (_, completion) = run(&[
            chunk(
                json!({"tool_calls": [{"id": "x", "function": {"name": "a", "arguments": "{"}}]}),
                json!(null),
            ),
            chunk(
                json!({"tool_calls": [{"function": {"arguments": "}"}}]}),
                json!(null),
            ),
            chunk(
                json!({"tool_calls": [{"id": "y", "function": {"name": "b", "arguments": "{}"}}]}),
                json!("tool_calls"),
            ),
        ]);
        let calls = completion.unwrap().tool_calls;
        let names: Vec<_> = calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(names, vec![("a", "{}"), ("b", "{}")]);
    }

    #[test]
    fn every_finish_reason_is_read() {
        for (wire, reason) in [
            ("stop", FinishReason::Stop),
            ("tool_calls", FinishReason::ToolCalls),
            ("function_call", FinishReason::ToolCalls),
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("eos", FinishReason::Other("eos".into())),
        ] {
            let (_, completion) = run(&[chunk(json!({"content": "x"}), json!(wire))]);
            assert_eq!(completion.unwrap().finish_reason, reason, "{wire}");
        }
        // [DONE] without any finish_reason: by what arrived.
        let (_, completion) = run(&[chunk(json!({"content": "x"}), json!(null)), "[DONE]".into()]);
        assert_eq!(completion.unwrap().finish_reason, FinishReason::Stop);
    }

    #[test]
    fn malformed_streams_say_what_is_wrong() {
        let message = |datas: &[String]| run(datas).1.unwrap_err().to_string();
        assert!(message(&["{not json".into()]).contains("chunk 1 is not JSON"));
        assert!(message(&["[1,2]".into()]).contains("not a JSON object"));
        assert!(message(&[json!({"choices": 3}).to_string()]).contains("not an array"));
        assert!(message(&[]).contains("no `data:` event arrived"));
        let cut = message(&[chunk(json!({"content": "half"}), json!(null))]);
        assert!(cut.contains("ended before the model finished"), "{cut}");
        let nameless = message(&[chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            json!("tool_calls"),
        )]);
        assert!(
            nameless.contains("tool call 0 has no function name"),
            "{nameless}"
        );
        let dotted = message(&[chunk(
            json!({"tool_calls": [{"index": 0, "function": {"name": "functions.x", "arguments": "{}"}}]}),
            json!("tool_calls"),
        )]);
        assert!(
            dotted.contains("`functions.x`, which is not a tool name"),
            "{dotted}"
        );
        let error = message(&[
            json!({"error": {"message": "overloaded", "type": "server_error"}}).to_string(),
        ]);
        assert_eq!(
            error,
            "the model provider reported an error in its response stream: overloaded"
        );
    }

    #[test]
    fn nothing_after_done_counts() {
        let (_, completion) = run(&[
            chunk(json!({"content": "x"}), json!("stop")),
            "[DONE]".into(),
            "garbage".into(),
        ]);
        assert_eq!(completion.unwrap().text, "x");
    }
}
