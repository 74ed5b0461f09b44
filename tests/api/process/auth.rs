//! Authentication as an operator meets it: the key command, the refusal to serve an
//! open port unauthenticated, and logs that name the caller but never the key.

use tempfile::TempDir;

use super::startup::run_to_exit;
use super::Server;

const ADMIN_KEY: &str = "process-admin-key-0123456789abcdefghij";

#[tokio::test]
async fn an_open_port_is_not_served_without_authentication() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("x.db").display());
    let env = [("DATABASE_URL", url.as_str()), ("LISTEN_ADDR", "0.0.0.0:0")];
    let (ok, printed) = run_to_exit(&[], &env).await;
    assert!(!ok, "{printed}");
    assert!(printed.contains("ADMIN_API_KEY"), "{printed}");
    assert!(printed.contains("--allow-unauthenticated"), "{printed}");

    let (ok, printed) = run_to_exit(&[], &[env[0], env[1], ("ADMIN_API_KEY", "short")]).await;
    assert!(!ok, "{printed}");
    assert!(printed.contains("ADMIN_API_KEY must be at least 32"), "{printed}");
    assert!(!printed.contains("short\""), "{printed}");
}

#[tokio::test]
async fn keys_made_on_the_command_line_work_and_logs_never_show_them() {
    let dir = TempDir::new().unwrap();
    let url = format!("sqlite://{}", dir.path().join("keys.db").display());
    let (ok, printed) = run_to_exit(
        &["keys", "create", "--tenant", "acme", "--name", "ops", "--scopes", "read"],
        &[("DATABASE_URL", &url)],
    )
    .await;
    assert!(ok, "{printed}");
    let key = printed
        .lines()
        .find(|line| line.starts_with("ask_"))
        .unwrap_or_else(|| panic!("no key printed: {printed}"))
        .to_owned();
    let (ok, printed) = run_to_exit(
        &["keys", "create", "--tenant", "a b", "--name", "ops"],
        &[("DATABASE_URL", &url)],
    )
    .await;
    assert!(!ok && printed.contains("tenant:"), "{printed}");
    let revoked = revoke_a_second_key(&url).await;

    let server = Server::start_with(&url, &[("ADMIN_API_KEY", ADMIN_KEY)]).await;
    let http = reqwest::Client::new();
    let read = http.get(server.url("/v1/sessions")).bearer_auth(&key).send().await.unwrap();
    assert_eq!(read.status(), 200);
    let write = http
        .post(server.url("/v1/sessions"))
        .bearer_auth(&key)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(write.status(), 403);
    let refused = http.get(server.url("/v1/sessions")).bearer_auth(&revoked).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let anonymous = http.get(server.url("/v1/sessions")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");

    let logged = || server.events.lock().unwrap().clone();
    let mut answered = Vec::new();
    for _ in 0..100 {
        answered = logged()
            .into_iter()
            .filter(|e| {
                e["fields"]["message"] == "request answered" || e["message"] == "request answered"
            })
            .collect();
        if answered.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let text = serde_json::to_string(&logged()).unwrap();
    assert!(!text.contains(&key), "a log line shows the key");
    assert!(!text.contains(ADMIN_KEY), "a log line shows the admin key");
    let hash = agent_sessions::model::KeyHash::of(&key).hex();
    assert!(!text.contains(&hash), "a log line shows the key's hash");
    let with_caller = answered
        .iter()
        .filter(|e| {
            let line = e.to_string();
            line.contains("\"tenant\":\"acme\"") && line.contains("\"key_id\":")
        })
        .count();
    assert_eq!(with_caller, 2, "{answered:?}");
}

/// Makes a second key of `acme`, finds it with `keys list` (which never prints a secret)
/// and revokes it with `keys revoke`; returns its secret.
async fn revoke_a_second_key(url: &str) -> String {
    let env = [("DATABASE_URL", url)];
    let (ok, printed) =
        run_to_exit(&["keys", "create", "--tenant", "acme", "--name", "temp"], &env).await;
    assert!(ok, "{printed}");
    let secret = printed.lines().find(|line| line.starts_with("ask_")).unwrap().to_owned();
    let (ok, listed) = run_to_exit(&["keys", "list", "--tenant", "acme"], &env).await;
    assert!(ok, "{listed}");
    assert!(!listed.contains(&secret), "{listed}");
    let rows: Vec<Vec<&str>> = listed
        .lines()
        .filter(|line| line.contains('\t'))
        .map(|line| line.split('\t').collect())
        .collect();
    assert_eq!(rows[0][..3], ["id", "tenant", "name"], "{listed}");
    let names: Vec<&str> = rows[1..].iter().map(|row| row[2]).collect();
    assert_eq!(names, ["ops", "temp"], "{listed}");
    assert_eq!(rows[1][4], "read", "{listed}");
    assert!(secret.starts_with(rows[2][3]), "{listed}");
    let (ok, none) = run_to_exit(&["keys", "list", "--tenant", "other"], &env).await;
    assert!(ok && none.lines().filter(|line| line.contains('\t')).count() == 1, "{none}");

    let (ok, printed) = run_to_exit(&["keys", "revoke", rows[2][0]], &env).await;
    assert!(ok, "{printed}");
    let (ok, printed) = run_to_exit(&["keys", "revoke", rows[2][0]], &env).await;
    assert!(!ok && printed.contains("no API key with id"), "{printed}");
    let (_, listed) = run_to_exit(&["keys", "list"], &env).await;
    assert!(!listed.contains("temp"), "{listed}");
    secret
}
