//! The chunks of the UI message stream as one type: the translator builds them, serde
//! writes them, and the document's schema of an event's `data` is derived from them.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// One chunk of the AI SDK's UI message stream, as an event's `data` carries it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum UiChunk {
    /// The assistant message begins; its id is the run's.
    #[serde(rename_all = "camelCase")]
    Start {
        message_id: String,
    },
    /// A model call begins.
    StartStep,
    /// A text part begins.
    TextStart {
        id: String,
    },
    /// Text of the part, as the model streams it (or whole, when it did not stream).
    TextDelta {
        id: String,
        delta: String,
    },
    TextEnd {
        id: String,
    },
    /// A tool call, its input whole. `providerExecuted` marks a call the service ran (or
    /// one the page answered before this stream), `dynamic` a call of an MCP server's tool.
    #[serde(rename_all = "camelCase")]
    ToolInputAvailable {
        tool_call_id: String,
        tool_name: String,
        /// Any JSON: what the model gave as the call's arguments.
        input: Value,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        provider_executed: bool,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        dynamic: bool,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputAvailable {
        tool_call_id: String,
        /// Any JSON: the tool's output.
        output: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolOutputError {
        tool_call_id: String,
        error_text: String,
    },
    /// A person rejected the call.
    #[serde(rename_all = "camelCase")]
    ToolOutputDenied {
        tool_call_id: String,
    },
    /// The run waits for a person to approve or reject the call.
    #[serde(rename_all = "camelCase")]
    ToolApprovalRequest {
        approval_id: String,
        tool_call_id: String,
    },
    /// A model call ends.
    FinishStep,
    /// The message ends: why, and the run's id, status and usage.
    #[serde(rename_all = "camelCase")]
    Finish {
        finish_reason: &'static str,
        /// `{run_id, status, usage}`.
        message_metadata: Value,
    },
    /// The run failed or was cancelled, or the stream broke off.
    #[serde(rename_all = "camelCase")]
    Error {
        error_text: String,
    },
}

impl UiChunk {
    /// The chunk as an event's `data`.
    pub fn data(&self) -> String {
        serde_json::to_string(self).expect("a chunk serializes")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use utoipa::PartialSchema;

    use super::*;

    fn one_of_each() -> Vec<UiChunk> {
        let call = || "call_1".to_owned();
        vec![
            UiChunk::Start { message_id: "run".into() },
            UiChunk::StartStep,
            UiChunk::TextStart { id: "text-1".into() },
            UiChunk::TextDelta { id: "text-1".into(), delta: "Hi".into() },
            UiChunk::TextEnd { id: "text-1".into() },
            UiChunk::ToolInputAvailable {
                tool_call_id: call(),
                tool_name: "lookup".into(),
                input: json!({"q": 1}),
                provider_executed: false,
                dynamic: false,
            },
            UiChunk::ToolOutputAvailable { tool_call_id: call(), output: json!("plain text") },
            UiChunk::ToolOutputError { tool_call_id: call(), error_text: "down".into() },
            UiChunk::ToolOutputDenied { tool_call_id: call() },
            UiChunk::ToolApprovalRequest { approval_id: call(), tool_call_id: call() },
            UiChunk::FinishStep,
            UiChunk::Finish { finish_reason: "stop", message_metadata: json!({}) },
            UiChunk::Error { error_text: "failed".into() },
        ]
    }

    #[test]
    fn the_schema_gives_each_chunk_the_type_serde_writes() {
        let written: Vec<Value> = (one_of_each().iter())
            .map(|chunk| serde_json::from_str::<Value>(&chunk.data()).unwrap()["type"].clone())
            .collect();
        let schema = serde_json::to_value(UiChunk::schema()).unwrap();
        let documented: Vec<Value> = (schema["oneOf"].as_array().unwrap().iter())
            .map(|chunk| chunk["properties"]["type"]["enum"][0].clone())
            .collect();
        assert_eq!(written, documented);
    }

    #[test]
    fn a_call_the_page_runs_is_not_marked_as_run_by_the_service() {
        let chunks = one_of_each();
        let call: Value = serde_json::from_str(&chunks[5].data()).unwrap();
        assert_eq!(
            call,
            json!({"type": "tool-input-available", "toolCallId": "call_1", "toolName": "lookup",
                   "input": {"q": 1}})
        );
        let start: Value = serde_json::from_str(&chunks[0].data()).unwrap();
        assert_eq!(start, json!({"type": "start", "messageId": "run"}));
    }
}
