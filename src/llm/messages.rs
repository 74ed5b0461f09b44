//! The messages of one request. A long session's history is most of them, and the same in
//! every turn of it: those are serialized once, kept by the run engine between turns,
//! and copied into each request body as they are.

use std::sync::Arc;

use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde_json::value::RawValue;

use super::Message;

/// `head`, then the serialized messages `shared[shared_from..]`, then `tail`.
#[derive(Debug, Clone, Default)]
pub struct Messages {
    pub head: Vec<Message>,
    pub shared: Arc<Vec<Box<RawValue>>>,
    pub shared_from: usize,
    pub tail: Vec<Message>,
}

impl Messages {
    pub fn plain(messages: Vec<Message>) -> Self {
        Self { tail: messages, ..Self::default() }
    }

    pub fn len(&self) -> usize {
        self.head.len() + self.shared.len().saturating_sub(self.shared_from) + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        for message in &self.head {
            seq.serialize_element(message)?;
        }
        for message in self.shared.get(self.shared_from..).unwrap_or_default() {
            seq.serialize_element(message)?;
        }
        for message in &self.tail {
            seq.serialize_element(message)?;
        }
        seq.end()
    }
}
