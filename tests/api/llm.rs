//! OpenAiClient against the fake server: streaming, retries and error mapping.

use std::time::{Duration, Instant};

use agent_sessions::llm::{
    ChatRequest, Completion, LlmClient, LlmError, LlmErrorCode, LlmSettings, Message, Messages,
    OpenAiClient, Progress, Role, ToolSpec,
};
use serde_json::json;
use tokio::sync::mpsc;

use crate::fake_llm::{FakeLlm, Reply};

const KEY: &str = "sk-test-secret";

fn settings(base_url: String) -> LlmSettings {
    LlmSettings {
        base_url,
        api_key: Some(KEY.parse().unwrap()),
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_millis(500),
        max_retries: 2,
        retry_base_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_secs(2),
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "fake-model".to_owned(),
        messages: Messages::plain(vec![
            Message::text(Role::System, "Be brief."),
            Message::text(Role::User, "Tell me a story."),
        ]),
        tools: Vec::new(),
        temperature: None,
        max_output_tokens: None,
        sampling: Default::default(),
    }
}

/// Runs one completion and returns it with the deltas the channel received.
async fn complete(
    settings: LlmSettings, request: &ChatRequest,
) -> (Result<Completion, LlmError>, Vec<String>) {
    let client = OpenAiClient::new(settings).expect("a client");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let result = client.complete(request, tx).await;
    let mut deltas = Vec::new();
    while let Ok(progress) = rx.try_recv() {
        if let Progress::Delta(delta) = progress {
            deltas.push(delta);
        }
    }
    (result, deltas)
}

/// Expects a failure with `code` whose message names each of `parts` and not the key.
async fn fails_with(fake: &FakeLlm, code: LlmErrorCode, parts: &[&str]) {
    let (result, _) = complete(settings(fake.base_url()), &request()).await;
    let error = result.expect_err("the completion fails");
    assert_eq!(error.code, code, "{}", error.message);
    assert!(!error.message.contains(KEY), "{}", error.message);
    for part in parts {
        assert!(error.message.contains(part), "{part:?} not in {:?}", error.message);
    }
}

fn error_reply(status: u16, error: serde_json::Value) -> Reply {
    let body = json!({ "error": error }).to_string();
    Reply::Status { status, retry_after: None, body }
}

#[tokio::test]
async fn text_arrives_in_deltas_and_usage_is_mapped() {
    let fake = FakeLlm::start().await;
    let text = "Once upon a time, a crab named Ünal wrote Rust. 🦀 The end.";
    fake.push(Reply::text(text));
    let (result, deltas) = complete(settings(fake.base_url()), &request()).await;
    let completion = result.expect("a completion");
    assert!(deltas.len() > 10, "{deltas:?}");
    assert!(deltas.iter().all(|d| !d.is_empty()));
    assert_eq!(deltas.concat(), text, "the text comes only as deltas, each once");
    assert!(completion.tool_calls.is_empty());
    assert_eq!(completion.finish_reason.as_deref(), Some("stop"));
    let n = deltas.len() as u64;
    assert_eq!((completion.usage.input_tokens, completion.usage.output_tokens), (12, n));
    assert_eq!(completion.usage.total_tokens, 12 + n);
}

#[tokio::test]
async fn the_request_body_and_authorization_follow_the_protocol() {
    let fake = FakeLlm::start().await;
    let mut request = request();
    request.max_output_tokens = Some(256);
    request.temperature = Some(0.5);
    request.tools = vec![
        ToolSpec {
            name: "get_weather".to_owned(),
            description: Some("The weather in a city".to_owned()),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        },
        ToolSpec {
            name: "now".to_owned(),
            description: None,
            parameters: json!({"type": "object"}),
        },
    ];
    complete(settings(format!("{}/", fake.base_url())), &request).await.0.expect("a completion");

    let mut without_key = settings(fake.base_url());
    without_key.api_key = None;
    complete(without_key, &self::request()).await.0.expect("a completion");

    let bodies = fake.requests();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "fake-model");
    assert_eq!(bodies[0]["stream"], true);
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    assert_eq!(bodies[0]["max_tokens"], 256);
    assert_eq!(bodies[0]["temperature"], 0.5);
    assert_eq!(
        bodies[0]["messages"],
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Tell me a story."}])
    );
    assert_eq!(
        bodies[0]["tools"],
        json!([
            {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
            {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
        ])
    );
    let mut keys: Vec<&str> =
        bodies[1].as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["messages", "model", "stream", "stream_options"]);
    assert_eq!(fake.authorizations(), [Some(format!("Bearer {KEY}")), None]);
}

#[tokio::test]
async fn interleaved_tool_calls_are_reassembled_by_index() {
    let fake = FakeLlm::start().await;
    let first = r#"{"city": "Zürich", "unit": "celsius"}"#;
    let second = r#"{"query": "rust \"async\" traits", "limit": 5}"#;
    fake.push(Reply::ToolCalls {
        calls: vec![
            ("call_a".to_owned(), "get_weather".to_owned(), first.to_owned()),
            ("call_b".to_owned(), "search".to_owned(), second.to_owned()),
        ],
        usage: Some((30, 7)),
    });
    let (result, deltas) = complete(settings(fake.base_url()), &request()).await;
    let completion = result.expect("a completion");
    assert!(deltas.is_empty(), "{deltas:?}");
    assert_eq!(completion.finish_reason.as_deref(), Some("tool_calls"));
    let calls: Vec<(&str, &str, &str)> = completion
        .tool_calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, [("call_a", "get_weather", first), ("call_b", "search", second)]);
    assert_eq!(completion.usage.total_tokens, 37);
}

#[tokio::test]
async fn a_429_with_retry_after_waits_then_succeeds() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::Status {
        status: 429,
        retry_after: Some("1".to_owned()),
        body: json!({"error": {"message": "slow down"}}).to_string(),
    });
    let started = Instant::now();
    let (result, deltas) = complete(settings(fake.base_url()), &request()).await;
    result.expect("a completion");
    assert_eq!(deltas.concat(), "ok", "only the attempt that succeeded sent text");
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_retry_after_longer_than_a_retry_may_wait_fails_at_once() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::Status {
        status: 429,
        retry_after: Some("3600".to_owned()),
        body: json!({"error": {"message": "come back in an hour"}}).to_string(),
    });
    let started = Instant::now();
    fails_with(&fake, LlmErrorCode::RateLimited, &["come back in an hour"]).await;
    assert_eq!(fake.requests().len(), 1, "no retry before the provider's time");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_429_every_time_is_rate_limited_after_every_retry() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::status(429));
    fails_with(&fake, LlmErrorCode::RateLimited, &["429", "fake 429"]).await;
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_500_is_retried_then_succeeds() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::status(500));
    fake.push(Reply::status(503));
    let (result, deltas) = complete(settings(fake.base_url()), &request()).await;
    result.expect("a completion");
    assert_eq!(deltas.concat(), "ok", "only the attempt that succeeded sent text");
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_500_every_time_is_unavailable() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::status(500));
    fails_with(&fake, LlmErrorCode::Unavailable, &["500", "fake 500"]).await;
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_401_fails_auth_without_retrying_or_leaking_the_key() {
    let fake = FakeLlm::start().await;
    let message = format!("Incorrect API key provided: {KEY}");
    fake.set_default(error_reply(401, json!({ "message": message })));
    fails_with(&fake, LlmErrorCode::AuthFailed, &["401", "Incorrect API key"]).await;
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_context_length_400_is_context_too_long() {
    let fake = FakeLlm::start().await;
    fake.set_default(error_reply(
        400,
        json!({
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }),
    ));
    fails_with(&fake, LlmErrorCode::ContextTooLong, &["400", "maximum context length is 8192"])
        .await;
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn an_unknown_model_404_is_a_bad_request() {
    let fake = FakeLlm::start().await;
    let error = json!({"message": "The model `nope` does not exist", "code": "model_not_found"});
    fake.set_default(error_reply(404, error));
    fails_with(&fake, LlmErrorCode::BadRequest, &["404", "does not exist"]).await;
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_stream_is_a_bad_response() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::Malformed);
    fails_with(&fake, LlmErrorCode::BadResponse, &["not valid JSON"]).await;
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_truncated_stream_is_a_bad_response_and_not_retried() {
    let fake = FakeLlm::start().await;
    fake.push(Reply::Truncated);
    let (result, deltas) = complete(settings(fake.base_url()), &request()).await;
    let error = result.expect_err("the completion fails");
    assert_eq!(error.code, LlmErrorCode::BadResponse, "{}", error.message);
    assert!(!deltas.is_empty());
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn no_response_headers_time_out_after_every_retry() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::Hang);
    let mut settings = settings(fake.base_url());
    settings.idle_timeout = Duration::from_millis(200);
    settings.max_retries = 1;
    let (result, _) = complete(settings, &request()).await;
    assert_eq!(result.expect_err("a timeout").code, LlmErrorCode::Timeout);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_stalling_after_a_delta_times_out_without_retrying() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::HangMidStream);
    let mut settings = settings(fake.base_url());
    settings.idle_timeout = Duration::from_millis(200);
    let (result, deltas) = complete(settings, &request()).await;
    assert_eq!(result.expect_err("a timeout").code, LlmErrorCode::Timeout);
    assert_eq!(deltas, ["Hel"]);
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn the_whole_request_timeout_bounds_a_slow_stream() {
    let fake = FakeLlm::start().await;
    fake.set_default(Reply::Text {
        deltas: vec!["a".to_owned(); 20],
        usage: None,
        delay: Duration::from_millis(50),
    });
    let mut settings = settings(fake.base_url());
    settings.request_timeout = Duration::from_millis(300);
    let (result, deltas) = complete(settings, &request()).await;
    assert_eq!(result.expect_err("a timeout").code, LlmErrorCode::Timeout);
    assert!(!deltas.is_empty());
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = listener.local_addr().expect("its address").port();
    drop(listener);
    let (result, _) = complete(settings(format!("http://127.0.0.1:{port}/v1")), &request()).await;
    let error = result.expect_err("the completion fails");
    assert_eq!(error.code, LlmErrorCode::Unavailable, "{}", error.message);
}
