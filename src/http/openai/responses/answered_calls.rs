//! A `function_call_output` must answer a call: one earlier in the same input, or one
//! among the newest items of the conversation or chain the response continues. OpenAI
//! refuses an output that answers nothing; sent on, the model would see neither it nor a
//! call, only what is left of the conversation.

use std::collections::HashSet;

use serde_json::Value;

use crate::http::openai::errors::{OpenAiError, Result};
use crate::http::AppState;
use crate::model::{Order, PageRequest, SessionId};
use crate::store::StoreError;

/// How far back a call is looked for: one page of the newest items. A call is answered
/// in the next request, never a thousand items later.
const LOOK_BACK: u32 = PageRequest::MAX_LIMIT;

/// The `call_id` of `item` when it is of `kind`.
fn call_id<'v>(item: &'v Value, kind: &str) -> Option<&'v str> {
    (item["type"] == kind).then(|| item["call_id"].as_str()).flatten()
}

/// Refuses the first output of `input` whose call is neither before it in `input` nor
/// among the newest items of `history`, the session the response runs on (none: an
/// empty one).
pub async fn check(
    state: &AppState, tenant: &str, history: Option<&SessionId>, input: &Value,
) -> Result<()> {
    let Some(items) = input.as_array() else {
        return Ok(());
    };
    let mut called = HashSet::new();
    let mut unanswered = Vec::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(id) = call_id(item, "function_call") {
            called.insert(id.to_owned());
        } else if let Some(id) = call_id(item, "function_call_output") {
            if !called.contains(id) {
                unanswered.push((i, id));
            }
        }
    }
    if unanswered.is_empty() {
        return Ok(());
    }
    if let Some(session) = history {
        let page = PageRequest::first(LOOK_BACK, Order::Desc);
        let stored = state.store.list_items(tenant, session, &page).await.map_err(|e| match e {
            StoreError::SessionNotFound => OpenAiError::conversation_not_found(session.as_str()),
            e => e.into(),
        })?;
        for stored in stored.data {
            let item: Value = serde_json::from_str(stored.item.get()).unwrap_or_default();
            if let Some(id) = call_id(&item, "function_call") {
                called.insert(id.to_owned());
            }
        }
    }
    match unanswered.into_iter().find(|(_, id)| !called.contains(*id)) {
        Some((i, id)) => Err(OpenAiError::invalid(
            &format!("input[{i}].call_id"),
            format!("No tool call found for function call output with call_id {id}."),
        )),
        None => Ok(()),
    }
}
