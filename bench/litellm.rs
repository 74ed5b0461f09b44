//! LiteLLM's proxy, started beside a benchmark on the fake LLM: the reference that
//! benchmarks measure the service's OpenAI surface and its streams against.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::process::{answers, free_port};

/// The proxy refuses to start without a master key.
pub const KEY: &str = "sk-bench-0123456789abcdef0123456789abcdef";

/// LiteLLM's proxy with one model, `bench`, bridged to the fake's Chat Completions.
pub async fn start(litellm: &str, llm_base_url: &str) -> (Child, String) {
    let dir = tempfile::TempDir::new().unwrap();
    let config = dir.path().join("litellm.yaml");
    std::fs::write(
        &config,
        format!(
            "model_list:\n  - model_name: bench\n    litellm_params:\n      \
             model: openai/chat_completions/bench\n      api_base: {llm_base_url}\n      api_key: fake\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Command::new(litellm)
        .args([
            "--config",
            config.to_str().unwrap(),
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .env("LITELLM_MASTER_KEY", KEY)
        // Its model price list from the package, not from the network.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        // It would keep its own tables in the service's database.
        .env_remove("DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("LiteLLM starts");
    let url = format!("http://127.0.0.1:{port}");
    let up = answers(&format!("{url}/health/liveliness"), Duration::from_secs(120)).await;
    assert!(up, "LiteLLM's proxy was not up within 120 s");
    // The config is read at start; the directory may go.
    (child, url)
}
