//! The shapes of the items a run generates: the OpenAI Responses items that agent SDKs
//! read back from a session.

use std::collections::HashSet;

use serde_json::value::RawValue;

use super::run::RequiredToolCall;

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

/// How many calls (of functions or MCP tools) at the end of `items` (a run's output) name
/// the same tool with the same arguments as the last one; other items between them do not
/// break the row.
pub fn repeated_calls(items: &[serde_json::Value]) -> u32 {
    let call = |item: &serde_json::Value| {
        matches!(item["type"].as_str(), Some("function_call" | "mcp_call"))
            .then(|| (item["name"].clone(), item["arguments"].clone()))
    };
    let mut calls = items.iter().rev().filter_map(call);
    let Some(last) = calls.next() else { return 0 };
    1 + calls.take_while(|call| *call == last).count() as u32
}

/// The function calls among `items` (a run's output) that no later
/// `function_call_output` answers, in order, each with its index in `items`.
fn open_calls(items: &[Box<RawValue>]) -> Vec<(usize, RequiredToolCall)> {
    #[derive(serde::Deserialize)]
    struct Part {
        #[serde(rename = "type")]
        kind: Option<String>,
        call_id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    }
    let mut open: Vec<(usize, RequiredToolCall)> = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Ok(part) = serde_json::from_str::<Part>(item.get()) else { continue };
        let Some(call_id) = part.call_id else { continue };
        match part.kind.as_deref() {
            Some("function_call") => open.push((
                index,
                RequiredToolCall {
                    call_id,
                    name: part.name.unwrap_or_default(),
                    arguments: part.arguments.unwrap_or_default(),
                    server_label: None,
                },
            )),
            // An output answers the earliest open call of its id: a model may use one id
            // again once its call is answered.
            Some("function_call_output") => {
                if let Some(answered) = open.iter().position(|(_, c)| c.call_id == call_id) {
                    open.remove(answered);
                }
            }
            _ => {}
        }
    }
    open
}

/// The function calls among `items` (a run's output) that no `function_call_output`
/// answers, in order.
pub fn unanswered_calls(items: &[Box<RawValue>]) -> Vec<RequiredToolCall> {
    open_calls(items).into_iter().map(|(_, call)| call).collect()
}

/// What an interrupted run keeps of its `output`: every item but function calls left
/// without their output and MCP calls still waiting for a person (the model must never
/// see a call unanswered), then the text the model had streamed of its next message, as
/// an incomplete message.
pub fn keep_interrupted(output: &mut Vec<Box<RawValue>>, partial: &str) {
    let mut open: HashSet<usize> = open_calls(output).into_iter().map(|(index, _)| index).collect();
    let decided = super::mcp_items::approval_responses(output.iter());
    for (index, item) in output.iter().enumerate() {
        let waiting = super::mcp_items::approval_requests([item]);
        if waiting.iter().any(|request| !decided.contains_key(&request.id)) {
            open.insert(index);
        }
    }
    let mut index = 0;
    output.retain(|_| {
        index += 1;
        !open.contains(&(index - 1))
    });
    if !partial.is_empty() {
        output.push(incomplete_assistant_message(partial));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_call_in_a_row_repeats() {
        let call = |args: &str| function_call("c", "lookup", args);
        let output = |id: &str| function_call_output(id, "done");
        let count = |items: &[Box<RawValue>]| {
            let values: Vec<_> =
                items.iter().map(|i| serde_json::from_str(i.get()).unwrap()).collect();
            repeated_calls(&values)
        };
        assert_eq!(count(&[]), 0);
        assert_eq!(count(&[assistant_message("hi")]), 0);
        let same = [call("{}"), output("c"), call("{}"), output("c"), call("{}")];
        assert_eq!(count(&same), 3);
        let changed = [call("{}"), call(r#"{"q":1}"#), call("{}")];
        assert_eq!(count(&changed), 1);
        let other_tool = [function_call("c", "other", "{}"), call("{}"), call("{}")];
        assert_eq!(count(&other_tool), 2);
    }

    #[test]
    fn an_interrupted_output_keeps_answered_calls_and_the_partial_text() {
        let mut output = vec![
            function_call("a", "lookup", "{}"),
            function_call("b", "lookup", "{}"),
            function_call_output("a", "done"),
        ];
        keep_interrupted(&mut output, "Half an ans");
        let kept: Vec<&str> = output.iter().map(|item| item.get()).collect();
        let expected = [
            function_call("a", "lookup", "{}"),
            function_call_output("a", "done"),
            incomplete_assistant_message("Half an ans"),
        ];
        assert_eq!(kept, expected.iter().map(|item| item.get()).collect::<Vec<_>>());
        let mut nothing_streamed = vec![assistant_message("whole")];
        keep_interrupted(&mut nothing_streamed, "");
        assert_eq!(nothing_streamed.len(), 1);
    }
}
