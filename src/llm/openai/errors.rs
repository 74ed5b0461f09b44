//! Turns what went wrong — a status, a transport failure, an error object inside the
//! stream — into an [`LlmError`] whose code decides retrying and whose message is safe
//! to show a client.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use crate::llm::{LlmError, LlmErrorCode};

/// The most of a provider's own error text that goes into a run's error message.
const MAX_DETAIL_CHARS: usize = 300;

pub(super) fn retryable(code: LlmErrorCode) -> bool {
    matches!(code, LlmErrorCode::RateLimited | LlmErrorCode::Unavailable | LlmErrorCode::Timeout)
}

pub(super) fn timed_out(what: &str, limit: Duration) -> LlmError {
    LlmError::new(LlmErrorCode::Timeout, format!("the LLM did not send {what} within {limit:?}"))
}

pub(super) fn transport_error(error: reqwest::Error) -> LlmError {
    if error.is_timeout() {
        return LlmError::new(LlmErrorCode::Timeout, format!("the LLM timed out: {error}"));
    }
    // reqwest's own text is generic; the cause (refused, reset, DNS) is in the chain.
    let mut message = format!("cannot reach the LLM: {error}");
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    LlmError::new(LlmErrorCode::Unavailable, truncate(&message, 2 * MAX_DETAIL_CHARS))
}

pub(super) fn status_code(status: u16, body: &str) -> LlmErrorCode {
    match status {
        401 | 403 => LlmErrorCode::AuthFailed,
        429 => LlmErrorCode::RateLimited,
        500..=599 => LlmErrorCode::Unavailable,
        400 | 413 | 422 if mentions_context_window(body) => LlmErrorCode::ContextTooLong,
        400..=499 => LlmErrorCode::BadRequest,
        _ => LlmErrorCode::BadResponse,
    }
}

/// Providers report an over-long prompt as a plain 400, told apart only by wording.
fn mentions_context_window(text: &str) -> bool {
    let text = text.to_lowercase();
    ["context_length_exceeded", "context length", "too many tokens", "context window"]
        .iter()
        .any(|phrase| text.contains(phrase))
}

/// Classifies an `{"error": ...}` object sent inside a 200 stream.
pub(super) fn classify_error(error: &Value) -> LlmErrorCode {
    let status = ["code", "status"].iter().find_map(|key| match error.get(key)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    });
    let text = error.to_string();
    match status.and_then(|s| u16::try_from(s).ok()) {
        Some(status @ 400..=599) => status_code(status, &text),
        _ if mentions_context_window(&text) => LlmErrorCode::ContextTooLong,
        _ if text.to_lowercase().contains("rate_limit") => LlmErrorCode::RateLimited,
        _ => LlmErrorCode::Unavailable,
    }
}

/// The provider's explanation, preferring `error.message` from a JSON body.
pub(super) fn provider_message(body: &str) -> String {
    let json = serde_json::from_str::<Value>(body).ok();
    let message = json.as_ref().and_then(|v| {
        ["/error/message", "/error", "/message", "/detail"]
            .iter()
            .find_map(|pointer| v.pointer(pointer)?.as_str())
    });
    let message = message.unwrap_or(body).trim();
    if message.is_empty() {
        "no error message".to_owned()
    } else {
        truncate(message, MAX_DETAIL_CHARS)
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// `Retry-After` as delta-seconds or an HTTP-date; a date in the past means now.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(retry_after: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_str(retry_after).expect("a header value"));
        headers
    }

    #[test]
    fn retry_after_accepts_seconds_and_http_dates() {
        assert_eq!(retry_after(&headers(" 7 ")), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(30));
        let wait = retry_after(&headers(&later)).expect("a wait");
        assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30), "{wait:?}");
        let past = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(retry_after(&headers(past)), Some(Duration::ZERO));
        assert_eq!(retry_after(&headers("soon")), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn provider_message_prefers_error_message_and_stays_short() {
        assert_eq!(provider_message(r#"{"error":{"message":" no ","type":"x"}}"#), "no");
        assert_eq!(provider_message(r#"{"error":"flat"}"#), "flat");
        assert_eq!(provider_message("<html>Bad Gateway</html>"), "<html>Bad Gateway</html>");
        assert_eq!(provider_message(""), "no error message");
        let long = provider_message(&"é".repeat(1000));
        assert_eq!(long.chars().count(), MAX_DETAIL_CHARS + 1);
    }

    #[test]
    fn statuses_map_to_codes() {
        let context = r#"{"error":{"message":"This model's maximum context length is 10"}}"#;
        assert_eq!(status_code(400, context), LlmErrorCode::ContextTooLong);
        assert_eq!(status_code(413, "Too many tokens in request"), LlmErrorCode::ContextTooLong);
        assert_eq!(status_code(400, r#"{"error":{"message":"bad"}}"#), LlmErrorCode::BadRequest);
        assert_eq!(status_code(403, context), LlmErrorCode::AuthFailed);
        assert_eq!(status_code(429, ""), LlmErrorCode::RateLimited);
        assert_eq!(status_code(502, ""), LlmErrorCode::Unavailable);
    }

    #[test]
    fn stream_error_objects_map_to_codes() {
        let classify = |v: &str| classify_error(&serde_json::from_str(v).expect("JSON"));
        assert_eq!(classify(r#"{"code":429,"message":"busy"}"#), LlmErrorCode::RateLimited);
        assert_eq!(classify(r#"{"code":"400","message":"nope"}"#), LlmErrorCode::BadRequest);
        assert_eq!(classify(r#"{"type":"rate_limit_error"}"#), LlmErrorCode::RateLimited);
        assert_eq!(classify(r#"{"code":"context_length_exceeded"}"#), LlmErrorCode::ContextTooLong);
        assert_eq!(classify(r#"{"message":"overloaded"}"#), LlmErrorCode::Unavailable);
    }
}
