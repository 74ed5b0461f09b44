//! The shapes of the items a run generates: the OpenAI Responses items that agent SDKs
//! read back from a session.

use serde_json::value::RawValue;

/// Keys are written in the order the Responses API uses, which a map would sort.
fn raw(text: String) -> Box<RawValue> {
    RawValue::from_string(text).expect("the shapes below are valid JSON")
}

fn string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

pub fn assistant_message(text: &str) -> Box<RawValue> {
    raw(format!(
        r#"{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":{},"annotations":[]}}]}}"#,
        string(text)
    ))
}

/// An answer the model stopped before it finished (`finish_reason` `length` or
/// `content_filter`), marked as the Responses API marks it.
pub fn incomplete_assistant_message(text: &str) -> Box<RawValue> {
    raw(format!(
        r#"{{"type":"message","role":"assistant","status":"incomplete","content":[{{"type":"output_text","text":{},"annotations":[]}}]}}"#,
        string(text)
    ))
}

pub fn function_call(call_id: &str, name: &str, arguments: &str) -> Box<RawValue> {
    raw(format!(
        r#"{{"type":"function_call","call_id":{},"name":{},"arguments":{}}}"#,
        string(call_id),
        string(name),
        string(arguments)
    ))
}

pub fn function_call_output(call_id: &str, output: &str) -> Box<RawValue> {
    raw(format!(
        r#"{{"type":"function_call_output","call_id":{},"output":{}}}"#,
        string(call_id),
        string(output)
    ))
}

/// A string input of a run, as the user message it stands for.
pub fn user_message(text: &str) -> Box<RawValue> {
    raw(format!(r#"{{"role":"user","content":{}}}"#, string(text)))
}
