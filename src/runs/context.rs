//! Turns stored session items (OpenAI *Responses* item shapes) into the Chat Completions
//! messages of one LLM call, within a token budget.
//!
//! | item | message |
//! |---|---|
//! | `{"role": "user"\|"system"\|"developer"\|"assistant", "content": "…"}`, `type` absent or `"message"` | same role, the string as content; `developer` becomes `system`, since many OpenAI-compatible servers reject `developer` |
//! | the same with `"content": [parts]` | the `text` of `input_text`, `output_text` and `text` parts (and, for the assistant, the `refusal` of `refusal` parts) joined with `"\n"`, so separate parts never run into one word; other parts (images, files…) are dropped |
//! | `{"type": "function_call", "call_id", "name", "arguments"}` | an assistant message with `tool_calls`; consecutive calls (once skipped items are left out) share one message, as parallel calls do |
//! | `{"type": "function_call_output", "call_id", "output"}` | a `tool` message answering `call_id`: a string `output` as is, an array of content parts as their texts joined with `"\n"`, anything else as its compact JSON |
//! | `{"type": "mcp_call", "id", "name", "arguments", "output", "error"}` | a call (its `name` made a function name) and its answer, as a function call and its output would be: the output, or `error: <error>` |
//! | `{"type": "mcp_approval_request", "id", …}` with an `mcp_approval_response` `{"approval_request_id", "approve": false, "reason"?}` | the call and the answer `{"error": "rejected", "reason"}`; an approved request is left out, as its `mcp_call` holds the call |
//! | `{"type": "compaction", "summary"}` (a summary the client brought back) | a system message with [`SUMMARY_HEADING`] and the summary |
//! | anything else: reasoning, unknown types or roles, missing or ill-typed fields, messages with no text | nothing: a stored item must never make a run fail |
//!
//! Servers reject a tool call without its answer and an answer without its call, so each
//! output is paired with the latest unanswered earlier call of the same `call_id`, across
//! history and current alike, and unpaired calls and outputs are left out of the input.
//!
//! The tests (`context/tests.rs`) walk the table above row by row.

use std::collections::HashMap;

use serde_json::Value;

use crate::llm::{Message, Role, ToolCall};

/// How the summary is introduced where a run sends it, as a developer message.
pub const SUMMARY_HEADING: &str = "Summary of the earlier conversation, which it replaces:";

/// Why the context cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the instructions and this run's input need about {needed} tokens, over the budget of {budget}"
)]
pub struct ContextTooLong {
    pub needed: u64,
    pub budget: u64,
}

/// Builds the messages for one LLM call: the instructions first (as a system message, when
/// given and non-empty), then the summary of a compacted session's earlier history (as a
/// system message that says what it is), then the history that fits the budget, then
/// `current` (this run's input and everything it generated so far), which is always kept
/// whole like the instructions and the summary.
///
/// History is dropped oldest first, in units that are never split: a tool-calls message goes
/// with the messages answering it and everything between them, so trimming cannot orphan a
/// call. A unit reaching into `current` counts as current. `needed` in the error counts the
/// instructions and every current unit.
pub fn build_messages(
    instructions: Option<&str>,
    summary: Option<&str>,
    history: &[Value],
    current: &[Value],
    max_input_tokens: Option<u64>,
) -> Result<Vec<Message>, ContextTooLong> {
    let items: Vec<(bool, Parsed)> = (history.iter().map(|v| (false, v)))
        .chain(current.iter().map(|v| (true, v)))
        .flat_map(|(is_current, v)| parse(v).into_iter().map(move |p| (is_current, p)))
        .collect();

    // partner[i]: the index in `items` of the call an output answers, or of a call's output.
    let mut partner = vec![None; items.len()];
    let mut pending: HashMap<&str, usize> = HashMap::new();
    for (i, (_, item)) in items.iter().enumerate() {
        match item {
            Parsed::Call(call) => _ = pending.insert(&call.call_id, i),
            Parsed::Output(call_id, _) => {
                if let Some(call) = pending.remove(call_id.as_str()) {
                    (partner[call], partner[i]) = (Some(i), Some(call));
                }
            }
            Parsed::Msg(_) => {}
        }
    }

    // Translated messages with whether they hold a current item; msg_of maps items to them.
    let mut msgs: Vec<(Message, bool)> = Vec::new();
    let mut msg_of = vec![usize::MAX; items.len()];
    let mut open_calls = false;
    for (i, (is_current, item)) in items.iter().enumerate() {
        let is_call = matches!(item, Parsed::Call(_));
        if matches!(item, Parsed::Call(_) | Parsed::Output(..)) && partner[i].is_none() {
            continue;
        }
        match item {
            Parsed::Call(call) if open_calls => {
                let (last, cur) = msgs.last_mut().expect("an open call group");
                last.tool_calls.push(call.clone().into());
                *cur |= is_current;
            }
            Parsed::Call(call) => msgs.push((Message::tool_calls(vec![call.clone()]), *is_current)),
            Parsed::Output(id, out) => msgs.push((Message::tool_output(id, out), *is_current)),
            Parsed::Msg(m) => msgs.push((m.clone(), *is_current)),
        }
        msg_of[i] = msgs.len() - 1;
        open_calls = is_call;
    }

    // reach[m]: the last message a unit starting at m must extend to.
    let mut reach: Vec<usize> = (0..msgs.len()).collect();
    for (i, p) in partner.iter().enumerate() {
        if let (Parsed::Call(_), Some(p)) = (&items[i].1, p) {
            reach[msg_of[i]] = reach[msg_of[i]].max(msg_of[*p]);
        }
    }
    // Units as (first message, cost, holds a current message), in order: a message starts
    // a unit unless an earlier one reaches it.
    let mut units: Vec<(usize, u64, bool)> = Vec::new();
    let mut end = 0;
    for (m, (message, is_current)) in msgs.iter().enumerate() {
        if units.is_empty() || m > end {
            units.push((m, 0, false));
        }
        end = end.max(reach[m]);
        let unit = units.last_mut().expect("pushed above");
        (unit.1, unit.2) = (unit.1 + estimate_tokens(message), unit.2 || *is_current);
    }

    let instructions = instructions.filter(|s| !s.is_empty()).map(str::to_owned);
    let summary = summary.map(|s| format!("{SUMMARY_HEADING}\n\n{s}"));
    let system: Vec<Message> =
        (instructions.into_iter().chain(summary)).map(|s| Message::text(Role::System, s)).collect();
    let first_kept = match max_input_tokens {
        None => 0,
        Some(budget) => {
            // Every unit after a current one is current too: messages keep item order.
            let split = units.iter().position(|u| u.2).unwrap_or(units.len());
            let mut total: u64 = system.iter().map(estimate_tokens).sum::<u64>()
                + units[split..].iter().map(|u| u.1).sum::<u64>();
            if total > budget {
                return Err(ContextTooLong { needed: total, budget });
            }
            let mut first = split;
            while first > 0 && total + units[first - 1].1 <= budget {
                total += units[first - 1].1;
                first -= 1;
            }
            units.get(first).map_or(msgs.len(), |u| u.0)
        }
    };
    Ok(system.into_iter().chain(msgs.into_iter().skip(first_kept).map(|(m, _)| m)).collect())
}

/// A conservative estimate of the tokens one message costs: 4 tokens of per-message framing,
/// one token per 3 bytes of content, and per tool call 4 tokens plus one per 3 bytes of its
/// id, name and arguments (likewise for a tool message's `tool_call_id`).
///
/// BPE tokenizers average about 4 characters per token on English text, so 3 bytes per token
/// overestimates ASCII and stays close for CJK (3 bytes and about one token per character).
/// Overestimating only drops a little more history; underestimating fails the call.
pub fn estimate_tokens(message: &Message) -> u64 {
    const FRAMING: u64 = 4;
    let per_bytes = |n: usize| (n as u64).div_ceil(3);
    let content = message.content.as_deref().map_or(0, str::len);
    let id = message.tool_call_id.as_deref().map_or(0, str::len);
    let calls: u64 = (message.tool_calls.iter())
        .map(|c| {
            FRAMING + per_bytes(c.id.len() + c.function.name.len() + c.function.arguments.len())
        })
        .sum();
    FRAMING + per_bytes(content) + per_bytes(id) + calls
}

/// An item worth sending, before pairing.
enum Parsed {
    Msg(Message),
    Call(ToolCall),
    Output(String, String),
}

fn parse(item: &Value) -> Vec<Parsed> {
    let str_field = |k: &str| item.get(k).and_then(Value::as_str);
    match str_field("type") {
        Some("mcp_call") => mcp_call(item).unwrap_or_default(),
        Some("mcp_approval_request") => {
            let (Some(call_id), Some(name)) =
                (str_field("id").filter(|s| !s.is_empty()), str_field("name"))
            else {
                return Vec::new();
            };
            let arguments = str_field("arguments").unwrap_or_default().to_owned();
            vec![Parsed::Call(ToolCall {
                call_id: call_id.to_owned(),
                name: function_name(name),
                arguments,
            })]
        }
        Some("mcp_approval_response") if item.get("approve") == Some(&Value::Bool(false)) => {
            let Some(request) = str_field("approval_request_id") else { return Vec::new() };
            let rejected = serde_json::json!({"error": "rejected", "reason": item.get("reason")});
            vec![Parsed::Output(request.to_owned(), rejected.to_string())]
        }
        _ => parse_one(item).into_iter().collect(),
    }
}

/// A call of an MCP tool and its answer, as a function call and its output.
fn mcp_call(item: &Value) -> Option<Vec<Parsed>> {
    let id = item.get("id")?.as_str().filter(|s| !s.is_empty())?;
    let call = ToolCall {
        call_id: id.to_owned(),
        name: function_name(item.get("name")?.as_str()?),
        arguments: item.get("arguments").and_then(Value::as_str).unwrap_or_default().to_owned(),
    };
    let answer = match (item.get("output"), item.get("error").and_then(Value::as_str)) {
        (_, Some(error)) => format!("error: {error}"),
        (Some(Value::String(output)), None) => output.clone(),
        (Some(other), None) => other.to_string(),
        (None, None) => String::new(),
    };
    Some(vec![Parsed::Call(call), Parsed::Output(id.to_owned(), answer)])
}

/// What a function may be called: an MCP tool's name with other characters as `_`.
fn function_name(name: &str) -> String {
    (name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }))
        .take(64)
        .collect()
}

fn parse_one(item: &Value) -> Option<Parsed> {
    let str_field = |k: &str| item.get(k).and_then(Value::as_str);
    match str_field("type") {
        None | Some("message") => {
            let role = match str_field("role")? {
                "user" => Role::User,
                "system" | "developer" => Role::System,
                "assistant" => Role::Assistant,
                _ => return None,
            };
            let text = match item.get("content")? {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts_text(parts, role == Role::Assistant),
                _ => return None,
            };
            (!text.is_empty()).then(|| Parsed::Msg(Message::text(role, text)))
        }
        Some("function_call") => Some(Parsed::Call(ToolCall {
            call_id: str_field("call_id").filter(|s| !s.is_empty())?.to_owned(),
            name: str_field("name")?.to_owned(),
            arguments: str_field("arguments")?.to_owned(),
        })),
        Some("compaction") => {
            let summary = str_field("summary").filter(|s| !s.is_empty())?;
            Some(Parsed::Msg(Message::text(
                Role::System,
                format!("{SUMMARY_HEADING}\n\n{summary}"),
            )))
        }
        Some("function_call_output") => {
            let call_id = str_field("call_id").filter(|s| !s.is_empty())?.to_owned();
            let output = match item.get("output")? {
                Value::String(s) => s.clone(),
                Value::Array(parts) if parts.iter().all(is_part) => parts_text(parts, false),
                other => other.to_string(),
            };
            Some(Parsed::Output(call_id, output))
        }
        Some(_) => None,
    }
}

fn is_part(part: &Value) -> bool {
    part.get("type").is_some_and(Value::is_string)
}

/// The texts of the text parts (and, when asked, refusals), joined with newlines.
fn parts_text(parts: &[Value], with_refusals: bool) -> String {
    let texts: Vec<&str> = (parts.iter())
        .filter_map(|p| match p.get("type").and_then(Value::as_str)? {
            "input_text" | "output_text" | "text" => p.get("text")?.as_str(),
            "refusal" if with_refusals => p.get("refusal")?.as_str(),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

#[cfg(test)]
mod tests;
