//! What the binary says when it starts, and when it cannot.

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use super::Server;
use crate::helpers::scratch_postgres;

/// Runs the binary to its exit; returns its status and everything it printed.
pub(super) async fn run_to_exit(args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        Command::new(env!("CARGO_BIN_EXE_agent-sessions"))
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_BACKTRACE", "0")
            .env("LOG_FORMAT", "json")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the binary exits within 30 s")
    .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

#[tokio::test]
async fn help_shows_no_secret_from_the_environment() {
    let (ok, help) = run_to_exit(
        &["--help"],
        &[
            ("DATABASE_URL", "postgres://app:s3cret@db/x"),
            ("LLM_API_KEY", "sk-very-secret"),
            ("ENCRYPTION_KEYS", "k1:c2VjcmV0LWtleS1tYXRlcmlhbA=="),
            ("ADMIN_API_KEY", "admin-very-secret-0123456789abcdefgh"),
        ],
    )
    .await;
    assert!(ok, "{help}");
    assert!(!help.contains("c2VjcmV0") && !help.contains("admin-very-secret"), "{help}");
    assert!(!help.contains("s3cret"), "{help}");
    assert!(!help.contains("sk-very-secret"), "{help}");
    assert!(help.contains("[env: DATABASE_URL]"), "{help}");
    assert!(help.contains("RUST_LOG"), "{help}");
}

#[tokio::test]
async fn an_address_in_use_is_named_with_the_option_to_change_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let (ok, printed) = run_to_exit(&[], &[("DATABASE_URL", &url), ("LISTEN_ADDR", &addr)]).await;
    assert!(!ok, "{printed}");
    assert!(printed.contains(&format!("cannot listen on {addr}")), "{printed}");
    assert!(printed.contains("--listen"), "{printed}");
    assert!(printed.contains("Address already in use"), "{printed}");
}

#[tokio::test]
async fn an_unreachable_postgres_is_named_without_its_password() {
    let (ok, printed) =
        run_to_exit(&[], &[("DATABASE_URL", "postgres://app:s3cret@127.0.0.1:1/x")]).await;
    assert!(!ok, "{printed}");
    assert!(printed.contains("postgres://app:***@127.0.0.1:1/x"), "{printed}");
    assert!(printed.contains("Connection refused"), "{printed}");
    assert!(!printed.contains("s3cret"), "{printed}");
    // A URL without a password is shown as it is, not as if it had one.
    let (_, printed) = run_to_exit(&[], &[("DATABASE_URL", "postgres://app@127.0.0.1:1/x")]).await;
    assert!(printed.contains("postgres://app@127.0.0.1:1/x"), "{printed}");
}

#[tokio::test]
async fn a_sqlite_file_that_cannot_be_opened_is_named() {
    let (ok, printed) =
        run_to_exit(&[], &[("DATABASE_URL", "sqlite:///no/such/directory/x.db")]).await;
    assert!(!ok, "{printed}");
    assert!(
        printed.contains("cannot open the database SQLite file /no/such/directory/x.db"),
        "{printed}"
    );
}

/// One line says what the process is doing, and no line carries the database password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_startup_line_says_what_the_process_does() {
    let database = scratch_postgres().await;
    // Trust authentication ignores the password; the log must not show it either way.
    let url = database.url.replacen("://postgres@", "://postgres:s3cret@", 1);
    assert!(url.contains("s3cret"), "{url}");
    let mut server = Server::start_with(&url, &[("RUN_WORKERS", "3"), ("LLM_MODEL", "m-1")]).await;
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    let events = server.events.lock().unwrap().clone();
    let line = events.iter().find(|e| e["message"] == "listening").expect("a listening line");
    assert_eq!(line["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(line["workers"], 3);
    assert_eq!(line["llm_model"], "m-1");
    assert!(line["schema_version"].as_i64().unwrap() > 0, "{line}");
    let shown = line["database"].as_str().unwrap();
    assert!(shown.contains("postgres:***@127.0.0.1"), "{line}");
    assert!(line["llm_base_url"].as_str().unwrap().starts_with("http"));
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("s3cret"), "{all}");
    // A start that finds its migrations applied logs no notice of the tables it skipped.
    let mut again = Server::start_with(&url, &[]).await;
    again.child.start_kill().unwrap();
    again.child.wait().await.unwrap();
    let all = serde_json::to_string(&*again.events.lock().unwrap()).unwrap();
    assert!(all.contains("listening") && !all.contains("already exists"), "{all}");
    database.drop().await;
}

#[tokio::test]
async fn logs_in_a_pipe_carry_no_colour_codes() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-sessions"))
        .env("DATABASE_URL", &url)
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("LOG_FORMAT", "pretty")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = lines.next_line().await.unwrap().expect("a listening line");
            if line.contains("listening") {
                return line;
            }
        }
    })
    .await
    .expect("the server listens within 30 s");
    assert!(line.contains("INFO"), "{line}");
    assert!(!line.contains('\u{1b}'), "{line:?}");
}

#[tokio::test]
async fn bad_encryption_keys_are_named_without_their_material() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    for (keys, expected) in [
        ("k1:c2hvcnQta2V5", "the key of `k1` is 9 bytes; AES-256 needs 32"),
        ("k1:%%%notbase64", "the key of `k1` is not valid base64"),
    ] {
        let (ok, printed) =
            run_to_exit(&[], &[("DATABASE_URL", &url), ("ENCRYPTION_KEYS", keys)]).await;
        assert!(!ok, "{printed}");
        assert!(printed.contains("ENCRYPTION_KEYS") && printed.contains(expected), "{printed}");
        assert!(!printed.contains("c2hvcnQ") && !printed.contains("notbase64"), "{printed}");
    }
}
