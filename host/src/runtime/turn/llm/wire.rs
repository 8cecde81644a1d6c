//! The two wire formats a declared model speaks: the request body of a
//! streamed completion (OpenAI Chat Completions, or Anthropic Messages
//! translated from the OpenAI-shaped conversation the guest hands over),
//! and the parse of its SSE stream into text deltas, tool calls, usage and
//! a finish reason. No I/O.

use serde_json::{Map, Value, json};

use super::settings::{LlmSettings, Provider};

/// Most tool calls kept from one completion.
pub(crate) const MAX_LLM_TOOL_CALLS: usize = 128;
/// Largest SSE event a stream may send (a larger one fails the call).
pub(crate) const MAX_SSE_EVENT_BYTES: usize = 1 << 20;

/// The JSON body of a streamed completion of `settings`' model.
pub(in crate::runtime::turn) fn request_body(
    settings: &LlmSettings,
    messages: &[Value],
    tools: &[Value],
    parameters: &Map<String, Value>,
) -> Value {
    let mut body: Map<String, Value> = parameters.clone();
    let max = settings.max_output_tokens();
    // The guest may ask for less than the alias allows, never more.
    let asked = (body.get("max_tokens").and_then(Value::as_u64))
        .map_or(max, |asked| (asked.min(u64::from(max))) as u32);
    for key in [
        "model",
        "messages",
        "tools",
        "stream",
        "stream_options",
        "system",
        "max_tokens",
        "max_completion_tokens",
    ] {
        body.remove(key);
    }
    body.insert("model".into(), json!(settings.model));
    body.insert("stream".into(), json!(true));
    body.insert("max_tokens".into(), json!(asked));
    match settings.provider {
        Provider::Openai => {
            body.insert("messages".into(), Value::Array(messages.to_vec()));
            body.insert("stream_options".into(), json!({"include_usage": true}));
            if !tools.is_empty() {
                body.insert("tools".into(), Value::Array(tools.to_vec()));
            }
        }
        Provider::Anthropic => {
            let (system, messages) = anthropic_messages(messages);
            if !system.is_empty() {
                body.insert("system".into(), json!(system));
            }
            body.insert("messages".into(), Value::Array(messages));
            let tools: Vec<Value> = tools.iter().filter_map(anthropic_tool).collect();
            if !tools.is_empty() {
                body.insert("tools".into(), Value::Array(tools));
            }
        }
    }
    Value::Object(body)
}

/// An OpenAI function tool as Anthropic takes it.
fn anthropic_tool(tool: &Value) -> Option<Value> {
    let function = tool.get("function")?;
    Some(json!({
        "name": function.get("name")?,
        "description": function.get("description").cloned().unwrap_or(json!("")),
        "input_schema": function.get("parameters").cloned().unwrap_or(json!({"type": "object"})),
    }))
}

/// OpenAI chat messages as Anthropic's `system` and `messages`: system
/// messages joined, an assistant's tool calls as `tool_use` blocks, tool
/// results as `tool_result` blocks of one user message.
fn anthropic_messages(messages: &[Value]) -> (String, Vec<Value>) {
    let mut system = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    let text_of = |m: &Value| match m.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    for message in messages {
        match message.get("role").and_then(Value::as_str) {
            Some("system") => system.push(text_of(message)),
            Some("assistant") => {
                let mut blocks = Vec::new();
                let text = text_of(message);
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in (message.get("tool_calls").and_then(Value::as_array))
                    .into_iter()
                    .flatten()
                {
                    let function = call.get("function").cloned().unwrap_or_default();
                    let arguments = function
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let input = serde_json::from_str::<Value>(arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.get("id").cloned().unwrap_or(json!("")),
                        "name": function.get("name").cloned().unwrap_or(json!("")),
                        "input": input,
                    }));
                }
                if !blocks.is_empty() {
                    out.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            Some("tool") => {
                let block = json!({
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id").cloned().unwrap_or(json!("")),
                    "content": text_of(message),
                });
                let joins = out.last().is_some_and(|last| {
                    last["role"] == "user"
                        && last["content"]
                            .as_array()
                            .is_some_and(|b| b.iter().all(|b| b["type"] == "tool_result"))
                });
                match out.last_mut() {
                    Some(last) if joins => {
                        if let Some(blocks) = last["content"].as_array_mut() {
                            blocks.push(block);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [block]})),
                }
            }
            _ => out.push(json!({"role": "user", "content": text_of(message)})),
        }
    }
    (system.join("\n\n"), out)
}

/// A tool call as it is assembled from the stream.
#[derive(Debug, Default, Clone)]
pub(in crate::runtime::turn) struct CallParts {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What one SSE event said.
#[derive(Debug, Default)]
pub(in crate::runtime::turn) struct Said {
    /// Text to stream into the message.
    pub text: String,
    /// Whether the event carried a token (text or a tool call's part).
    pub token: bool,
}

/// The state of one streamed completion.
#[derive(Debug, Default)]
pub(in crate::runtime::turn) struct Assembly {
    pub calls: Vec<CallParts>,
    /// Anthropic's content block index → index in `calls`.
    blocks: Vec<(u64, usize)>,
    pub finish_reason: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub done: bool,
}

impl Assembly {
    /// Feeds one SSE event (`event` name, `data` text).
    pub(in crate::runtime::turn) fn feed(
        &mut self,
        provider: Provider,
        event: &str,
        data: &str,
    ) -> Result<Said, String> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(Said::default());
        }
        if data.trim().is_empty() {
            return Ok(Said::default());
        }
        let value: Value =
            serde_json::from_str(data).map_err(|e| format!("a stream event is not JSON: {e}"))?;
        if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
            let message = (error.get("message").and_then(Value::as_str))
                .map_or_else(|| error.to_string(), str::to_string);
            return Err(format!("the provider's stream says: {message}"));
        }
        match provider {
            Provider::Openai => self.feed_openai(&value),
            Provider::Anthropic => {
                let kind = value.get("type").and_then(Value::as_str).unwrap_or(event);
                self.feed_anthropic(kind, &value)
            }
        }
    }

    fn call_at(&mut self, index: usize) -> Result<&mut CallParts, String> {
        if index >= MAX_LLM_TOOL_CALLS {
            return Err(format!(
                "the model asked for more than {MAX_LLM_TOOL_CALLS} tool calls"
            ));
        }
        if self.calls.len() <= index {
            self.calls.resize(index + 1, CallParts::default());
        }
        Ok(&mut self.calls[index])
    }

    fn feed_openai(&mut self, value: &Value) -> Result<Said, String> {
        let mut said = Said::default();
        if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
            self.input_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0);
            self.output_tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
        }
        let Some(choice) = value.pointer("/choices/0") else {
            return Ok(said);
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            said.text.push_str(text);
            said.token = true;
        }
        for part in (delta.get("tool_calls").and_then(Value::as_array))
            .into_iter()
            .flatten()
        {
            let index = part["index"].as_u64().unwrap_or(0) as usize;
            let call = self.call_at(index)?;
            if let Some(id) = part.get("id").and_then(Value::as_str) {
                call.id = id.to_string();
            }
            if let Some(name) = part.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(arguments) = part.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(arguments);
            }
            said.token = true;
        }
        Ok(said)
    }

    fn feed_anthropic(&mut self, kind: &str, value: &Value) -> Result<Said, String> {
        let mut said = Said::default();
        match kind {
            "message_start" => {
                let usage = &value["message"]["usage"];
                self.input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
                self.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &value["content_block"];
                if block["type"] == "tool_use" {
                    let index = self.calls.len();
                    let call = self.call_at(index)?;
                    call.id = block["id"].as_str().unwrap_or_default().to_string();
                    call.name = block["name"].as_str().unwrap_or_default().to_string();
                    let at = value["index"].as_u64().unwrap_or(0);
                    self.blocks.push((at, index));
                    said.token = true;
                }
            }
            "content_block_delta" => {
                let delta = &value["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        said.text
                            .push_str(delta["text"].as_str().unwrap_or_default());
                        said.token = !said.text.is_empty();
                    }
                    Some("input_json_delta") => {
                        let at = value["index"].as_u64().unwrap_or(0);
                        if let Some(&(_, index)) = self.blocks.iter().find(|(b, _)| *b == at) {
                            let part = delta["partial_json"].as_str().unwrap_or_default();
                            self.calls[index].arguments.push_str(part);
                            said.token = true;
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    let reason = match reason {
                        "end_turn" | "stop_sequence" => "stop",
                        "max_tokens" => "length",
                        "tool_use" => "tool_calls",
                        "refusal" => "content_filter",
                        other => other,
                    };
                    self.finish_reason = Some(reason.to_string());
                }
                if let Some(out) = value["usage"]["output_tokens"].as_u64() {
                    self.output_tokens = out;
                }
                if let Some(input) = value["usage"]["input_tokens"].as_u64() {
                    self.input_tokens = input;
                }
            }
            "message_stop" => self.done = true,
            _ => {}
        }
        Ok(said)
    }

    /// Whether the stream ended as its format says a whole stream ends.
    pub(in crate::runtime::turn) fn complete(&self, provider: Provider) -> bool {
        match provider {
            Provider::Openai => self.finish_reason.is_some(),
            Provider::Anthropic => self.done,
        }
    }
}

/// Splits SSE bytes into events as they arrive.
#[derive(Default)]
pub(in crate::runtime::turn) struct SseSplitter {
    buffer: String,
}

impl SseSplitter {
    /// Adds `bytes` and returns the events they complete: (event name, data).
    pub(in crate::runtime::turn) fn push(
        &mut self,
        bytes: &[u8],
    ) -> Result<Vec<(String, String)>, String> {
        self.buffer.push_str(&String::from_utf8_lossy(bytes));
        if self.buffer.contains('\r') {
            self.buffer = self.buffer.replace("\r\n", "\n");
        }
        let mut events = Vec::new();
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(rest) = line.strip_prefix("data:") {
                    data.push(rest.strip_prefix(' ').unwrap_or(rest));
                } else if let Some(rest) = line.strip_prefix("event:") {
                    name = rest.trim().to_string();
                }
            }
            if !data.is_empty() {
                events.push((name, data.join("\n")));
            }
        }
        if self.buffer.len() > MAX_SSE_EVENT_BYTES {
            return Err(format!(
                "a stream event is larger than {MAX_SSE_EVENT_BYTES} bytes"
            ));
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_openai_stream_assembles_text_calls_and_usage() {
        let mut sse = SseSplitter::default();
        let mut a = Assembly::default();
        let bytes = concat!(
            ": comment\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":20,\"completion_tokens\":7}}\n\ndata: [DONE]\n\n"
        );
        let (first, rest) = bytes.split_at(30);
        let mut text = String::new();
        for part in [first, rest] {
            for (event, data) in sse.push(part.as_bytes()).unwrap() {
                text += &a.feed(Provider::Openai, &event, &data).unwrap().text;
            }
        }
        assert_eq!(text, "Hel");
        assert_eq!(a.calls.len(), 1);
        assert_eq!(
            (a.calls[0].id.as_str(), a.calls[0].arguments.as_str()),
            ("c1", "{\"a\":1}")
        );
        assert_eq!((a.input_tokens, a.output_tokens), (20, 7));
        assert!(a.complete(Provider::Openai) && a.done);
    }

    #[test]
    fn an_anthropic_stream_assembles_text_calls_and_usage() {
        let mut a = Assembly::default();
        let events = [
            json!({"type":"message_start","message":{"usage":{"input_tokens":11,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu1","name":"f","input":{}}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"2}"}}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}),
            json!({"type":"message_stop"}),
        ];
        let mut text = String::new();
        for e in events {
            text += &a
                .feed(Provider::Anthropic, "", &e.to_string())
                .unwrap()
                .text;
        }
        assert_eq!(text, "Hi");
        assert_eq!(a.calls[0].arguments, "{\"a\":2}");
        assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!((a.input_tokens, a.output_tokens), (11, 9));
        assert!(a.complete(Provider::Anthropic));
    }

    #[test]
    fn openai_messages_become_anthropic_messages() {
        let messages = vec![
            json!({"role":"system","content":"Be brief."}),
            json!({"role":"user","content":"hi"}),
            json!({"role":"assistant","content":null,"tool_calls":[
                {"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},
                {"id":"c2","type":"function","function":{"name":"g","arguments":""}}]}),
            json!({"role":"tool","tool_call_id":"c1","content":"one"}),
            json!({"role":"tool","tool_call_id":"c2","content":"two"}),
        ];
        let (system, out) = anthropic_messages(&messages);
        assert_eq!(system, "Be brief.");
        assert_eq!(out.len(), 3);
        assert_eq!(out[1]["content"][0]["input"], json!({"a": 1}));
        assert_eq!(out[1]["content"][1]["input"], json!({}));
        assert_eq!(out[2]["content"].as_array().unwrap().len(), 2);
    }
}
