//! Who a session belongs to: the app and the user whose state documents its writes may
//! change beside its own (Google ADK's app and user state).

use super::field::{check_identifier, InvalidField};

/// An app's or a user's id: 1 to 128 characters of the id alphabet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerId(String);

impl OwnerId {
    pub fn parse(field: &str, value: String) -> Result<Self, InvalidField> {
        check_identifier(field, &value)?;
        Ok(Self(value))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The owners a request names. A session takes each once, from the first write that
/// names it, and keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    pub app_id: Option<OwnerId>,
    pub user_id: Option<OwnerId>,
}

impl Owners {
    /// The request's `app_id` and `user_id`, each checked.
    pub fn parse(app_id: Option<String>, user_id: Option<String>) -> Result<Self, InvalidField> {
        Ok(Self {
            app_id: app_id.map(|id| OwnerId::parse("app_id", id)).transpose()?,
            user_id: user_id.map(|id| OwnerId::parse("user_id", id)).transpose()?,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.app_id.is_none() && self.user_id.is_none()
    }

    pub fn app(&self) -> Option<&str> {
        self.app_id.as_ref().map(OwnerId::as_str)
    }

    pub fn user(&self) -> Option<&str> {
        self.user_id.as_ref().map(OwnerId::as_str)
    }
}

/// A state document shared by sessions: an app's, or one of its users'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerDocument {
    App(OwnerId),
    User(OwnerId, OwnerId),
}

impl OwnerDocument {
    /// Its key: the app's id and the user's, empty for the app's own document (no user
    /// id is empty).
    pub fn key(&self) -> (&str, &str) {
        match self {
            Self::App(app) => (app.as_str(), ""),
            Self::User(app, user) => (app.as_str(), user.as_str()),
        }
    }
}
