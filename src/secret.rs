//! A value that logs must never show whole, such as an API key or a database URL: its
//! `Debug` output is what its [`Redaction`] leaves of it.

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

pub struct Secret<R = Hidden>(String, PhantomData<R>);

/// What of a secret `Debug` output shows.
pub trait Redaction {
    fn redact(value: &str) -> String;
}

/// Nothing of it: `***`.
pub struct Hidden;

impl Redaction for Hidden {
    fn redact(_: &str) -> String {
        "***".into()
    }
}

impl<R> Secret<R> {
    /// The value itself, for where it is used, never for a log.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl<R> Clone for Secret<R> {
    fn clone(&self) -> Self {
        Self(self.0.clone(), PhantomData)
    }
}

impl<R> FromStr for Secret<R> {
    type Err = Infallible;

    fn from_str(value: &str) -> Result<Self, Infallible> {
        Ok(Self(value.to_owned(), PhantomData))
    }
}

impl<R> From<&str> for Secret<R> {
    fn from(value: &str) -> Self {
        Self(value.to_owned(), PhantomData)
    }
}

impl<R: Redaction> fmt::Debug for Secret<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&R::redact(&self.0))
    }
}
