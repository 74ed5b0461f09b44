//! A state document: one JSON object kept beside a session, returned exactly as it was
//! given (key order, large numbers, escapes), and changed whole or by a JSON merge
//! patch (RFC 7396). The patch works on the JSON text, member by member, so that the
//! members it does not touch keep their text.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::{InvalidField, Owners};

/// A JSON object's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDocument(String);

/// How a write changes a state document, and the most bytes the result may have.
#[derive(Debug, Clone)]
pub struct StateWrite {
    pub change: StateChange,
    pub max_bytes: usize,
}

/// What a write changes besides items, all in its transaction: the owners it names
/// and the state documents (the session's, its user's, its app's) it changes.
#[derive(Debug, Clone, Default)]
pub struct StateChanges {
    pub owners: Owners,
    pub session: Option<StateWrite>,
    pub user: Option<StateWrite>,
    pub app: Option<StateWrite>,
}

impl StateChanges {
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty()
            && self.session.is_none()
            && self.user.is_none()
            && self.app.is_none()
    }

    /// What a retry must repeat of them, for an Idempotency-Key's fingerprint.
    pub fn fingerprint(&self) -> String {
        let document = |write: &Option<StateWrite>| match write {
            Some(write) => format!("{:?}", write.change),
            None => String::new(),
        };
        format!(
            "{:?}\0{:?}\0{}\0{}\0{}",
            self.owners.app(),
            self.owners.user(),
            document(&self.session),
            document(&self.user),
            document(&self.app)
        )
    }
}

#[derive(Debug, Clone)]
pub enum StateChange {
    /// The whole document.
    Replace(StateDocument),
    /// A merge patch: `null` removes a member, objects merge, anything else replaces.
    Merge(StateDocument),
}

impl StateChange {
    /// The document or patch the change carries.
    pub fn document(&self) -> &StateDocument {
        match self {
            Self::Replace(document) | Self::Merge(document) => document,
        }
    }
}

impl StateDocument {
    /// Kept with sessions before their first state write: `{}`.
    pub fn empty() -> Self {
        Self("{}".to_owned())
    }

    /// The request's `field`, which must be a JSON object.
    pub fn new(field: &str, raw: &RawValue) -> Result<Self, InvalidField> {
        if !raw.get().trim_start().starts_with('{') {
            return Err(InvalidField::new(field, "must be a JSON object"));
        }
        Ok(Self(raw.get().to_owned()))
    }

    /// A document as stored, read back.
    pub fn stored(text: String) -> Self {
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn as_raw(&self) -> &RawValue {
        // Made only from a JSON object's text (checked, or written by `merged`).
        serde_json::from_str(&self.0).expect("a state document is JSON")
    }

    /// This document with `patch` applied (RFC 7396).
    fn merged(&self, patch: &Self) -> Result<Self, serde_json::Error> {
        let merged = merge(Members::read(&self.0)?, Members::read(&patch.0)?)?;
        Ok(Self(merged.text()))
    }
}

impl StateWrite {
    /// The document that `current` becomes, or `state` over the limit.
    pub fn apply(&self, current: &StateDocument) -> Result<StateDocument, StateTooLarge> {
        let next = match &self.change {
            StateChange::Replace(document) => document.clone(),
            // Both sides are objects that parsed once already.
            StateChange::Merge(patch) => current.merged(patch).expect("state documents are JSON"),
        };
        if next.0.len() > self.max_bytes {
            return Err(StateTooLarge { size: next.0.len(), limit: self.max_bytes });
        }
        Ok(next)
    }
}

/// A state write whose result is over `MAX_STATE_BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("would be {size} bytes, over the limit of {limit} (MAX_STATE_BYTES)")]
pub struct StateTooLarge {
    pub size: usize,
    pub limit: usize,
}

/// An object's members in their order, each value as its text.
struct Members(Vec<(String, Box<RawValue>)>);

impl Members {
    fn read(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    fn text(&self) -> String {
        let members: Vec<String> = self
            .0
            .iter()
            .map(|(key, value)| {
                let key = serde_json::to_string(key).expect("a string serializes");
                format!("{key}:{}", value.get())
            })
            .collect();
        format!("{{{}}}", members.join(","))
    }
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members: Vec<(String, Box<RawValue>)> = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    // A repeated name: the last one counts, as for every JSON reader here.
                    members.retain(|(k, _)| *k != key);
                    members.push((key, value));
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

fn is_object(value: &RawValue) -> bool {
    value.get().trim_start().starts_with('{')
}

fn merge(mut target: Members, patch: Members) -> Result<Members, serde_json::Error> {
    for (key, value) in patch.0 {
        let at = target.0.iter().position(|(k, _)| *k == key);
        if value.get().trim() == "null" {
            if let Some(at) = at {
                target.0.remove(at);
            }
            continue;
        }
        let value = if is_object(&value) {
            // A patch's object merges into the target's object, or into nothing (which
            // also drops the patch's own nulls).
            let base = match at.map(|at| &target.0[at].1) {
                Some(current) if is_object(current) => Members::read(current.get())?,
                _ => Members(Vec::new()),
            };
            RawValue::from_string(merge(base, Members::read(value.get())?)?.text())?
        } else {
            value
        };
        match at {
            Some(at) => target.0[at].1 = value,
            None => target.0.push((key, value)),
        }
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> StateDocument {
        StateDocument::new("state", &RawValue::from_string(text.to_owned()).unwrap()).unwrap()
    }

    fn patched(target: &str, patch: &str) -> String {
        let write = StateWrite { change: StateChange::Merge(doc(patch)), max_bytes: 1 << 20 };
        write.apply(&doc(target)).unwrap().0
    }

    #[test]
    fn merges_as_rfc_7396_says() {
        // The examples of RFC 7396, appendix A, on objects.
        assert_eq!(patched(r#"{"a":"b"}"#, r#"{"a":"c"}"#), r#"{"a":"c"}"#);
        assert_eq!(patched(r#"{"a":"b"}"#, r#"{"b":"c"}"#), r#"{"a":"b","b":"c"}"#);
        assert_eq!(patched(r#"{"a":"b"}"#, r#"{"a":null}"#), "{}");
        assert_eq!(patched(r#"{"a":"b","b":"c"}"#, r#"{"a":null}"#), r#"{"b":"c"}"#);
        assert_eq!(patched(r#"{"a":["b"]}"#, r#"{"a":"c"}"#), r#"{"a":"c"}"#);
        assert_eq!(patched(r#"{"a":"c"}"#, r#"{"a":["b"]}"#), r#"{"a":["b"]}"#);
        assert_eq!(
            patched(r#"{"a":{"b":"c"}}"#, r#"{"a":{"b":"d","c":null}}"#),
            r#"{"a":{"b":"d"}}"#
        );
        assert_eq!(patched(r#"{"a":[{"b":"c"}]}"#, r#"{"a":[1]}"#), r#"{"a":[1]}"#);
        assert_eq!(patched(r#"{"e":null}"#, r#"{"a":1}"#), r#"{"e":null,"a":1}"#);
        assert_eq!(patched("{}", r#"{"a":{"bb":{"ccc":null}}}"#), r#"{"a":{"bb":{}}}"#);
    }

    #[test]
    fn keeps_the_text_of_what_it_does_not_touch() {
        let target = r#"{"z": 1, "big": 123456789012345678901234567890, "s": "\u00e9", "a": 1.50}"#;
        assert_eq!(
            patched(target, r#"{"a": 2}"#),
            r#"{"z":1,"big":123456789012345678901234567890,"s":"\u00e9","a":2}"#
        );
    }

    #[test]
    fn refuses_what_is_not_an_object_and_what_grows_too_large() {
        let array = RawValue::from_string("[1]".to_owned()).unwrap();
        assert_eq!(StateDocument::new("state", &array).unwrap_err().field, "state");
        let write =
            StateWrite { change: StateChange::Replace(doc(r#"{"a":"bcd"}"#)), max_bytes: 8 };
        assert_eq!(write.apply(&StateDocument::empty()).unwrap_err().limit, 8);
    }
}
