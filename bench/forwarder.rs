//! A bare forwarder: what relaying an LLM's token stream costs with nothing else done. It
//! answers `POST /v1/sessions/{id}/runs` by making one streamed Chat Completions call and
//! relaying each delta's text as the service's `message.delta` events, storing nothing:
//! the same HTTP in and out, the same parsing of each chunk, none of the service's work.
//!
//! The streams benchmark runs it as a process of its own: its own binary, started again
//! with `BENCH_FORWARDER=<port> <LLM base URL>` in its environment.

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{json, Value};

/// The variable that makes the benchmark's binary a forwarder.
pub const VARIABLE: &str = "BENCH_FORWARDER";

/// Serves as a forwarder on `127.0.0.1:<port>` to the LLM at `llm_url`, until killed.
pub async fn serve(spec: &str) {
    let (port, llm_url) = spec.split_once(' ').expect("`<port> <LLM base URL>`");
    let (http, url) = (reqwest::Client::new(), format!("{llm_url}/chat/completions"));
    let relay = move || {
        let (http, url) = (http.clone(), url.clone());
        async move { relay(&http, &url).await }
    };
    let app = axum::Router::new()
        .route("/v1/sessions/{id}/runs", axum::routing::post(relay))
        .route("/readyz", axum::routing::get(|| async { "ready" }));
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}")).await.unwrap();
    axum::serve(listener, app).await.unwrap();
}

async fn relay(http: &reqwest::Client, url: &str) -> Response {
    let body = json!({"model": "bench", "stream": true,
                      "messages": [{"role": "user", "content": "hi"}]});
    let upstream = http.post(url).json(&body).send().await.expect("the LLM answers");
    let mut buffer = Vec::new();
    let events = upstream.bytes_stream().map(move |chunk| {
        buffer.extend_from_slice(&chunk?);
        let mut out = String::new();
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else { continue };
            let Ok(chunk) = serde_json::from_slice::<Value>(data) else { continue };
            if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str() {
                out.push_str(&format!(
                    "event: message.delta\ndata: {}\n\n",
                    json!({"delta": text})
                ));
            }
        }
        Ok::<_, reqwest::Error>(Bytes::from(out))
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(events))
        .unwrap()
}
