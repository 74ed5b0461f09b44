//! A session's history with the messages of its settled items made once: an item is
//! settled when nothing that can come after it changes its messages. A call waits for its
//! output (which may come in a later turn, or from the client), and a call group and a
//! unit hold until it comes; so the items before the first call still waiting are
//! settled, and stay so as the history grows at its end. Their messages are kept
//! serialized, and each request copies them as they are.
//!
//! A call no output can answer any more, because a later call took its `call_id` first,
//! is left out of every request, and settles like any other item.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use super::parse::{parse, Parsed};
use super::{assemble, translate, ContextTooLong, Translated};
use crate::llm::Messages;

/// The messages of a history's settled items, serialized, and their units.
#[derive(Debug, Clone, Default)]
pub(super) struct Settled {
    pub json: Arc<Vec<Box<RawValue>>>,
    /// Each unit of them as (first message, estimated tokens).
    pub units: Vec<(usize, u64)>,
}

impl Settled {
    pub fn len(&self) -> usize {
        self.json.len()
    }
}

/// What one kept message costs beside its JSON: its box, the allocator's header and its
/// share of the units.
const MESSAGE_OVERHEAD: u64 = 48;

/// A session's history, oldest first.
#[derive(Debug, Clone, Default)]
pub struct PreparedHistory {
    settled: Settled,
    /// The bytes the settled messages hold.
    settled_bytes: u64,
    /// The items after the settled ones: the first call still waiting and what follows.
    unsettled: Vec<Value>,
}

impl PreparedHistory {
    /// Adds items at the end of the history, and makes the messages of those it settles.
    pub fn extend(&mut self, items: impl IntoIterator<Item = Value>) {
        self.unsettled.extend(items);
        let parsed: Vec<Vec<Parsed>> = self.unsettled.iter().map(parse).collect();
        let settling = settled_prefix(&parsed);
        if settling == 0 {
            return;
        }
        let items: Vec<(bool, Parsed)> =
            parsed.into_iter().take(settling).flatten().map(|p| (false, p)).collect();
        let Translated { msgs, units } = translate(&items);
        let offset = self.settled.len();
        let json = Arc::make_mut(&mut self.settled.json);
        for (message, _) in &msgs {
            let raw = serde_json::value::to_raw_value(message).expect("a message serializes");
            self.settled_bytes += raw.get().len() as u64 + MESSAGE_OVERHEAD;
            json.push(raw);
        }
        self.settled.units.extend(units.iter().map(|&(first, cost, _)| (offset + first, cost)));
        self.unsettled.drain(..settling);
    }

    /// About the bytes of memory the history holds: its settled messages, and its
    /// unsettled items at twice their JSON's length.
    pub fn held_bytes(&self) -> u64 {
        let unsettled: usize = self.unsettled.iter().map(|item| item.to_string().len()).sum();
        self.settled_bytes + 2 * unsettled as u64
    }

    /// The messages of one LLM call with this history, as `build_messages` makes them.
    pub fn messages(
        &self, instructions: Option<&str>, summary: Option<&str>, current: &[Value],
        max_input_tokens: Option<u64>,
    ) -> Result<Messages, ContextTooLong> {
        let (settled, unsettled) = (&self.settled, &self.unsettled);
        assemble(instructions, summary, settled, unsettled, current, max_input_tokens)
            .map(|(messages, _)| messages)
    }

    /// The estimated tokens of all the messages of an LLM call with this history.
    pub fn estimated_tokens(
        &self, instructions: Option<&str>, summary: Option<&str>, current: &[Value],
    ) -> u64 {
        let (settled, unsettled) = (&self.settled, &self.unsettled);
        assemble(instructions, summary, settled, unsettled, current, None).map_or(0, |(_, t)| t)
    }
}

/// How many leading items are settled: every call among them is answered among them, or
/// can no longer be answered.
fn settled_prefix(items: &[Vec<Parsed>]) -> usize {
    // reach[i]: the last item that a call of item i is answered in; usize::MAX while its
    // answer may still come.
    let mut reach: Vec<usize> = (0..items.len()).collect();
    let mut waiting: HashMap<&str, usize> = HashMap::new();
    for (i, parsed) in items.iter().enumerate() {
        for part in parsed {
            match part {
                Parsed::Call(call) => _ = waiting.insert(&call.call_id, i),
                Parsed::Output(call_id, _) => {
                    if let Some(call) = waiting.remove(call_id.as_str()) {
                        reach[call] = reach[call].max(i);
                    }
                }
                Parsed::Msg(_) => {}
            }
        }
    }
    for &call in waiting.values() {
        reach[call] = usize::MAX;
    }
    // The longest prefix that no call in it reaches beyond.
    let (mut settled, mut end) = (0, 0);
    for (i, r) in reach.iter().enumerate() {
        end = end.max(*r);
        if end <= i {
            settled = i + 1;
        }
    }
    settled
}

#[cfg(test)]
mod tests;
