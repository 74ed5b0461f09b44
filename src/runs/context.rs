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
//! A session's history is most of every request and the same in each: [`PreparedHistory`]
//! keeps the messages of its items serialized, so that a turn translates only what was
//! appended since (`context/prepared.rs`).
//!
//! The tests (`context/tests.rs`) walk the table above row by row.

use std::collections::HashMap;

use serde_json::Value;

use crate::llm::{Message, Messages, Role};
use parse::{parse, Parsed};
pub use prepared::PreparedHistory;
use prepared::Settled;

mod parse;
mod prepared;

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
    instructions: Option<&str>, summary: Option<&str>, history: &[Value], current: &[Value],
    max_input_tokens: Option<u64>,
) -> Result<Vec<Message>, ContextTooLong> {
    let (messages, _) =
        assemble(instructions, summary, &Settled::default(), history, current, max_input_tokens)?;
    Ok(messages.head.into_iter().chain(messages.tail).collect())
}

/// What [`build_messages`] builds, from history of which the messages of `settled` are made
/// already, followed by `unsettled` items; with the estimated tokens of what it keeps.
fn assemble(
    instructions: Option<&str>, summary: Option<&str>, settled: &Settled, unsettled: &[Value],
    current: &[Value], max_input_tokens: Option<u64>,
) -> Result<(Messages, u64), ContextTooLong> {
    let items: Vec<(bool, Parsed)> = (unsettled.iter().map(|v| (false, v)))
        .chain(current.iter().map(|v| (true, v)))
        .flat_map(|(is_current, v)| parse(v).into_iter().map(move |p| (is_current, p)))
        .collect();
    let Translated { msgs, units } = translate(&items);

    let instructions = instructions.filter(|s| !s.is_empty()).map(str::to_owned);
    let summary = summary.map(|s| format!("{SUMMARY_HEADING}\n\n{s}"));
    let system: Vec<Message> =
        (instructions.into_iter().chain(summary)).map(|s| Message::text(Role::System, s)).collect();
    // Every unit, settled ones first, as (first message, cost, holds a current message);
    // messages are numbered settled ones first.
    let offset = settled.len();
    let all_units = (settled.units.iter().map(|&(first, cost)| (first, cost, false)))
        .chain(units.iter().map(|&(first, cost, current)| (offset + first, cost, current)));
    let mut total: u64 = system.iter().map(estimate_tokens).sum();
    let first_kept = match max_input_tokens {
        None => {
            total += all_units.map(|u| u.1).sum::<u64>();
            0
        }
        Some(budget) => {
            let all_units: Vec<(usize, u64, bool)> = all_units.collect();
            // Every unit after a current one is current too: messages keep item order.
            let split = all_units.iter().position(|u| u.2).unwrap_or(all_units.len());
            total += all_units[split..].iter().map(|u| u.1).sum::<u64>();
            if total > budget {
                return Err(ContextTooLong { needed: total, budget });
            }
            let mut first = split;
            while first > 0 && total + all_units[first - 1].1 <= budget {
                total += all_units[first - 1].1;
                first -= 1;
            }
            all_units.get(first).map_or(offset + msgs.len(), |u| u.0)
        }
    };
    let messages = Messages {
        head: system,
        shared: settled.json.clone(),
        shared_from: first_kept.min(offset),
        tail: msgs.into_iter().skip(first_kept.saturating_sub(offset)).map(|(m, _)| m).collect(),
    };
    Ok((messages, total))
}

/// Messages translated from parsed items, and the units history is dropped in.
struct Translated {
    /// Each message, with whether it holds a current item.
    msgs: Vec<(Message, bool)>,
    /// Units as (first message, cost, holds a current message), in order: a message starts
    /// a unit unless an earlier one reaches it.
    units: Vec<(usize, u64, bool)>,
}

/// Pairs calls and outputs, translates what is sent into messages and groups them in units.
fn translate(items: &[(bool, Parsed)]) -> Translated {
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
    Translated { msgs, units }
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

#[cfg(test)]
mod tests;
