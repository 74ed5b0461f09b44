//! A disk that fills up under the SQLite file, as a real one does: the commit itself
//! fails (its log cannot grow), which a cap on the file's pages cannot show. The binary
//! runs in a mount namespace of its own on a 3 MiB tmpfs that a ballast file shares;
//! removing the ballast gives the space back while the process runs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::process::Command;
use tokio::sync::Mutex;

use super::{client, Server};
use crate::helpers::get_json;

/// Appends `{"client", "n"}` items until `failures` appends were refused; returns the
/// numbers of those acknowledged.
async fn append_until_full(base: String, client_no: usize, failures: usize) -> Vec<u64> {
    let http = client();
    let (mut acknowledged, mut refused) = (Vec::new(), 0);
    let url = format!("{base}/v1/sessions/client-{client_no}/items");
    let pad = "x".repeat(1024);
    for n in 0..20_000u64 {
        let answer = http.post(&url).json(&json!({"items": [{"n": n, "pad": pad}]})).send().await;
        let answer = answer.expect("every append is answered");
        match answer.status().as_u16() {
            201 => acknowledged.push(n),
            507 => {
                assert!(answer.headers().contains_key("retry-after"));
                let problem: Value = answer.json().await.unwrap();
                assert_eq!(problem["code"], "storage_full", "{problem}");
                refused += 1;
                if refused == failures {
                    return acknowledged;
                }
            }
            status => panic!(
                "append {n} of client {client_no}: {status} {}",
                answer.text().await.unwrap()
            ),
        }
    }
    panic!("client {client_no}: the disk never filled");
}

/// Writes to `path` until the disk has no byte left.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    let block = [0u8; 4096];
    while file.write_all(&block).is_ok() {}
    while file.write_all(&block[..1]).is_ok() {}
}

async fn stored(base: &str, session: &str) -> Vec<u64> {
    let page: Value =
        get_json(&client(), format!("{base}/v1/sessions/{session}/items?limit=1000")).await;
    page["data"].as_array().unwrap().iter().map(|i| i["item"]["n"].as_u64().unwrap()).collect()
}

#[tokio::test]
async fn a_full_disk_never_acknowledges_what_it_lost_and_heals_when_space_returns() {
    let dir = TempDir::new().unwrap();
    let mount = dir.path().display().to_string();
    let mut command = Command::new("unshare");
    command.args(["--user", "--map-root-user", "--mount", "sh", "-c"]).arg(
        r#"mount -t tmpfs -o size=3m tmpfs "$0" && head -c 1048576 /dev/zero > "$0/ballast" && exec "$1""#,
    );
    command.args([&mount, env!("CARGO_BIN_EXE_agent-sessions")]);
    let url = format!("sqlite://{mount}/full.db");
    let server = Server::start_as(command, &url, &[]).await;

    let results = Arc::new(Mutex::new(BTreeMap::new()));
    let clients = (0..8).map(|client_no| {
        let (base, results) = (server.base.clone(), results.clone());
        tokio::spawn(async move {
            let acknowledged = append_until_full(base, client_no, 20).await;
            results.lock().await.insert(client_no, acknowledged);
        })
    });
    for client in clients.collect::<Vec<_>>() {
        client.await.unwrap();
    }
    for (client_no, acknowledged) in results.lock().await.iter() {
        assert_eq!(stored(&server.base, &format!("client-{client_no}")).await, *acknowledged);
    }
    let http = client();
    // The disk, seen through the namespace the binary runs in. A small append may still
    // have fitted after the clients' last refusal, even into the log's slack; a filler
    // takes the last byte and an append larger than any before needs new pages, so it
    // is refused, and readiness, which then commits a write of its own, finds no room.
    let pid = server.child.id().unwrap();
    let disk: PathBuf = format!("/proc/{pid}/root{mount}").into();
    fill(&disk.join("filler"));
    let large = json!({"items": [{"n": 99_999, "pad": "x".repeat(256 * 1024)}]});
    let refused = http.post(server.url("/v1/sessions/client-0/items")).json(&large);
    let refused = refused.send().await.unwrap();
    assert_eq!(refused.status(), 507, "{}", refused.text().await.unwrap());
    let ready = http.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503, "writes cannot commit: {}", ready.text().await.unwrap());

    for file in ["ballast", "filler"] {
        std::fs::remove_file(disk.join(file)).expect("the test's own files can be removed");
    }
    let again = json!({"items": [{"n": 100_000}]});
    let answer = http.post(server.url("/v1/sessions/client-0/items")).json(&again).send().await;
    assert_eq!(answer.unwrap().status(), 201, "appends succeed again without a restart");
    let mut expected = results.lock().await[&0].clone();
    expected.push(100_000);
    assert_eq!(stored(&server.base, "client-0").await, expected);
    let ready = http.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200, "{}", ready.text().await.unwrap());
}
