//! Folds Chat Completions stream chunks into one [`Completion`].
//!
//! Servers differ in the details: some repeat a tool call's id and name in every
//! piece, some send `null` where others omit a field, some send usage in a last chunk
//! with no choices, some never send `[DONE]`. The chunk types accept all of them.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::errors::{classify_error, provider_message};
use crate::llm::{Completion, LlmError, LlmErrorCode, Progress, TokenUsage, ToolCall};

#[derive(Deserialize)]
struct Chunk {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<Usage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// One attempt's progress through the stream.
#[derive(Default)]
pub(super) struct Accumulator {
    /// Keyed by the provider's `index`, which is also the order to return them in.
    calls: BTreeMap<usize, PartialCall>,
    usage: TokenUsage,
    finish_reason: Option<String>,
    model: Option<String>,
    /// Once true, a retry would contradict text the caller has already published.
    pub(super) delivered: bool,
}

impl Accumulator {
    /// Applies one event's data; `Ok(true)` means the stream is complete.
    pub(super) fn apply(
        &mut self, data: &str, progress: &mpsc::UnboundedSender<Progress>,
    ) -> Result<bool, LlmError> {
        if data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            LlmError::new(
                LlmErrorCode::BadResponse,
                format!("the LLM sent a stream chunk that is not valid JSON: {e}"),
            )
        })?;
        if let Some(error) = chunk.error {
            let code = classify_error(&error);
            let detail = provider_message(&error.to_string());
            return Err(LlmError::new(code, format!("the LLM failed mid-stream: {detail}")));
        }
        if chunk.model.is_some() {
            self.model = chunk.model;
        }
        if let Some(usage) = chunk.usage {
            let input = usage.prompt_tokens.unwrap_or(0);
            let output = usage.completion_tokens.unwrap_or(0);
            self.usage = TokenUsage {
                input_tokens: input,
                output_tokens: output,
                total_tokens: usage.total_tokens.unwrap_or(input + output),
            };
        }
        let Some(choice) = chunk.choices.and_then(|c| c.into_iter().next()) else {
            return Ok(false);
        };
        if let Some(reason) = choice.finish_reason {
            self.finish_reason = Some(reason);
        }
        let Some(delta) = choice.delta else {
            return Ok(false);
        };
        if let Some(content) = delta.content.filter(|c| !c.is_empty()) {
            self.delivered = true;
            // The caller may have stopped listening; the completion is still wanted.
            let _ = progress.send(Progress::Delta(content));
        }
        for (position, piece) in delta.tool_calls.into_iter().flatten().enumerate() {
            let call = self.calls.entry(piece.index.unwrap_or(position)).or_default();
            keep_first(&mut call.id, piece.id);
            if let Some(function) = piece.function {
                keep_first(&mut call.name, function.name);
                call.arguments.push_str(function.arguments.as_deref().unwrap_or(""));
            }
        }
        Ok(false)
    }

    /// The body ended: complete only if the model had said it was finished.
    pub(super) fn finish(&mut self, saw_done: bool) -> Result<Completion, LlmError> {
        if !saw_done && self.finish_reason.is_none() {
            return Err(LlmError::new(
                LlmErrorCode::BadResponse,
                "the stream ended before the completion finished",
            ));
        }
        let tool_calls = std::mem::take(&mut self.calls)
            .into_values()
            .map(|call| ToolCall {
                call_id: if call.id.is_empty() {
                    format!("call_{}", uuid::Uuid::now_v7().simple())
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        Ok(Completion {
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason.take(),
            model: self.model.take(),
        })
    }
}

fn keep_first(slot: &mut String, piece: Option<String>) {
    if slot.is_empty() {
        if let Some(piece) = piece {
            *slot = piece;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[&str]) -> (Result<Completion, LlmError>, Vec<String>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut acc = Accumulator::default();
        let mut result = None;
        for event in events {
            match acc.apply(event, &tx) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => {
                    result = Some(Err(e));
                    break;
                }
            }
        }
        let result = result.unwrap_or_else(|| acc.finish(events.contains(&"[DONE]")));
        let mut sent = Vec::new();
        while let Ok(progress) = rx.try_recv() {
            if let Progress::Delta(delta) = progress {
                sent.push(delta);
            }
        }
        (result, sent)
    }

    #[test]
    fn repeated_ids_and_null_fields_are_tolerated() {
        let (result, sent) = run(&[
            r#"{"choices":[{"delta":{"role":"assistant","content":null,"tool_calls":[{"index":1,"id":"b","function":{"name":"f2","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f1","arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"f2","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":"tool_calls"}],"usage":null}"#,
        ]);
        let completion = result.expect("finished by finish_reason without [DONE]");
        assert!(sent.is_empty());
        assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
        let calls = completion.tool_calls;
        assert_eq!(calls.len(), 2);
        assert!(calls[0].call_id.starts_with("call_") && calls[0].call_id.len() == 37);
        assert_eq!((calls[0].name.as_str(), calls[0].arguments.as_str()), ("f1", "{\"a\":1}"));
        assert_eq!((calls[1].call_id.as_str(), calls[1].name.as_str()), ("b", "f2"));
        assert_eq!(calls[1].arguments, "{}");
    }

    #[test]
    fn usage_without_total_is_summed() {
        let (result, sent) = run(&[
            r#"{"choices":[{"delta":{"content":"hi"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#,
            "[DONE]",
        ]);
        let completion = result.expect("a completion");
        assert_eq!(sent, ["hi"]);
        assert_eq!(completion.usage.total_tokens, 7);
    }

    #[test]
    fn a_mid_stream_error_object_is_classified() {
        let (result, _) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"f"}}]}}]}"#,
            r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
        ]);
        let error = result.expect_err("an error");
        assert_eq!(error.code, LlmErrorCode::Unavailable);
        assert!(error.message.contains("The server had an error"), "{}", error.message);
    }

    #[test]
    fn a_stream_without_finish_or_done_is_bad() {
        let (result, sent) = run(&[r#"{"choices":[{"delta":{"content":"par"}}]}"#]);
        assert_eq!(result.expect_err("an error").code, LlmErrorCode::BadResponse);
        assert_eq!(sent, ["par"]);
    }
}
