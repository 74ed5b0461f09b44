//! The container files' commands work as written: the binary starts with the
//! environment the Dockerfile's documented `docker run` gives it, and with the one
//! `docker-compose.yml` gives it (CI checks the compose file itself with
//! `docker-compose config`).

use std::process::Stdio;
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::helpers::scratch_postgres;

fn repository_file(name: &str) -> String {
    std::fs::read_to_string(format!("{}/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The Dockerfile's `ENV` lines, then the `-e` options of the `docker run` it documents.
fn image_environment() -> Vec<(String, String)> {
    let dockerfile = repository_file("Dockerfile");
    let mut env: Vec<(String, String)> = dockerfile
        .lines()
        .filter_map(|line| line.strip_prefix("ENV "))
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let run = dockerfile
        .lines()
        .find_map(|line| line.strip_prefix("#   docker run -p"))
        .expect("the Dockerfile documents a `docker run`");
    let words: Vec<&str> = run.split_whitespace().collect();
    for pair in words.windows(2).filter(|pair| pair[0] == "-e") {
        let (name, value) = pair[1].split_once('=').unwrap();
        env.push((name.to_owned(), value.to_owned()));
    }
    env
}

/// The `environment:` of the compose file's `agent-sessions` service, each
/// `${NAME:-default}` given its default.
fn compose_environment() -> Vec<(String, String)> {
    let compose = repository_file("docker-compose.yml");
    let service = compose.split("\n  agent-sessions:\n").nth(1).expect("the service");
    let block = service.split("\n    environment:\n").nth(1).expect("its environment");
    block
        .lines()
        .take_while(|line| line.starts_with("      "))
        .filter_map(|line| line.trim().split_once(": "))
        .map(|(name, value)| (name.to_owned(), with_defaults(value.trim_matches('"'))))
        .collect()
}

fn with_defaults(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let expression = &rest[start + 2..end];
        out.push_str(expression.split_once(":-").map_or("", |(_, default)| default));
        rest = &rest[end + 1..];
    }
    out + rest
}

/// Starts the binary with only `env` (and a free port on the address it names), in an
/// empty working directory as the image's `/data`; returns where it listens.
async fn starts_with(env: &[(String, String)]) -> String {
    let data = TempDir::new().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-sessions"));
    command.env_clear().current_dir(data.path()).env("LOG_FORMAT", "json");
    for (name, value) in env {
        let value = match name.as_str() {
            "LISTEN_ADDR" => format!("{}:0", value.rsplit_once(':').unwrap().0),
            _ => value.clone(),
        };
        command.env(name, value);
    }
    let mut child =
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    let listening = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            let event: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if event["message"] == "listening" {
                return Some(event["addr"].as_str().unwrap().to_owned());
            }
            printed.push(line);
        }
        None
    })
    .await
    .expect("the binary starts or exits within 30 s");
    let Some(addr) = listening else {
        let mut stderr = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr)
            .await
            .unwrap();
        panic!("the binary did not start with {env:?}: {printed:?} {stderr}");
    };
    assert!(addr.starts_with("0.0.0.0:"), "{addr}");
    let port = addr.rsplit_once(':').unwrap().1;
    let health = reqwest::get(format!("http://127.0.0.1:{port}/readyz")).await.unwrap();
    assert_eq!(health.status(), 200);
    addr
}

#[tokio::test]
async fn the_images_documented_command_starts_the_service() {
    let env = image_environment();
    assert!(env.iter().any(|(name, value)| name == "LISTEN_ADDR" && value.starts_with("0.0.0.0")));
    starts_with(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_files_service_starts_on_its_postgres() {
    let database = scratch_postgres().await;
    let mut env = compose_environment();
    let url = env.iter_mut().find(|(name, _)| name == "DATABASE_URL").expect("a DATABASE_URL");
    assert!(url.1.starts_with("postgres://postgres:agent-sessions@postgres:5432/"), "{url:?}");
    // The compose network's `postgres` host is this test's server.
    url.1 = database.url.clone();
    starts_with(&env).await;
    database.drop().await;
}
