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

/// How many function calls at the end of `items` (a run's output) name the same tool with
/// the same arguments as the last one; other items between them do not break the row.
pub fn repeated_calls<'a>(items: impl DoubleEndedIterator<Item = &'a Box<RawValue>>) -> u32 {
    #[derive(serde::Deserialize, PartialEq)]
    struct Call {
        #[serde(rename = "type")]
        kind: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    }
    let mut calls = items
        .rev()
        .filter_map(|item| serde_json::from_str::<Call>(item.get()).ok())
        .filter(|call| call.kind.as_deref() == Some("function_call"));
    let Some(last) = calls.next() else { return 0 };
    1 + calls.take_while(|call| *call == last).count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_call_in_a_row_repeats() {
        let call = |args: &str| function_call("c", "lookup", args);
        let output = |id: &str| function_call_output(id, "done");
        let count = |items: &[Box<RawValue>]| repeated_calls(items.iter());
        assert_eq!(count(&[]), 0);
        assert_eq!(count(&[assistant_message("hi")]), 0);
        let same = [call("{}"), output("c"), call("{}"), output("c"), call("{}")];
        assert_eq!(count(&same), 3);
        let changed = [call("{}"), call(r#"{"q":1}"#), call("{}")];
        assert_eq!(count(&changed), 1);
        let other_tool = [function_call("c", "other", "{}"), call("{}"), call("{}")];
        assert_eq!(count(&other_tool), 2);
    }
}
