//! A POST of JSON whose answer is JSON, as the benchmarks' clients make them.

use serde_json::Value;

/// Posts `body` to `url` and reads the answer's JSON; a benchmark stops at any failure.
pub async fn post_json(client: &reqwest::Client, url: String, body: &Value) -> Value {
    client.post(url).json(body).send().await.unwrap().json().await.unwrap()
}
