//! What authentication costs on the hot paths: appends and tail reads through a server
//! with auth off and one with auth on (a tenant's key, looked up through the cache),
//! alternating in the same run on the same database (off-on, then on-off, so that a
//! machine's drift weighs on both alike), and the ratio of the two.
//!
//! `cargo bench --bench auth -- [sqlite|postgres] [seconds] [clients] [rounds]`

mod database;
mod on_off;
mod phases;

use std::sync::Arc;

use agent_sessions::app::Application;
use agent_sessions::http::api_keys::issue_key;
use agent_sessions::store::{self, SessionStore};
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use on_off::{compare, server_config, Shape, Target};

const ADMIN_KEY: &str = "bench-admin-key-0123456789abcdefghijkl";

#[tokio::main]
async fn main() {
    let shape = Shape::from_args();
    let database = BenchDatabase::create(&shape.backend).await;
    let config = server_config();
    let store: Arc<dyn SessionStore> =
        store::connect(&database.url, config.database_max_connections).await.unwrap();
    let shutdown = CancellationToken::new();
    let mut servers = Vec::new();
    let mut targets = Vec::new();
    for auth in [false, true] {
        let mut config = config.clone();
        config.admin_api_key = auth.then(|| ADMIN_KEY.into());
        let app = Application::with_store(&config, store.clone()).await.unwrap();
        let base = format!("http://{}", app.local_addr().unwrap());
        servers.push(tokio::spawn(app.run(shutdown.clone())));
        let key = match auth {
            true => Some(
                issue_key(&*store, "bench".into(), "bench".into(), None, None).await.unwrap().1,
            ),
            false => None,
        };
        targets.push((if auth { "auth on " } else { "auth off" }, base, key));
    }
    let [off, on] = [&targets[0], &targets[1]];
    compare(
        [
            Target { label: "auth off", base: &off.1, authorization: None },
            Target {
                label: "auth on ",
                base: &on.1,
                authorization: on.2.as_ref().map(|k| format!("Bearer {k}")),
            },
        ],
        &shape,
    )
    .await;

    shutdown.cancel();
    for server in servers {
        server.await.unwrap().unwrap();
    }
    database.drop().await;
}
