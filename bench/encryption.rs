//! What encryption at rest costs on the hot paths: appends and tail reads through a
//! server storing plain values and one encrypting under `ENCRYPTION_KEYS`, alternating in
//! the same run on the same database; then `reencrypt` of everything written, in rows
//! per second.
//!
//! `cargo bench --bench encryption -- [sqlite|postgres] [seconds] [clients] [rounds]`

mod database;
mod on_off;
mod phases;

use std::time::Instant;

use agent_sessions::app::Application;
use agent_sessions::store::{self, Keyring, PayloadCodec};
use tokio_util::sync::CancellationToken;

use database::BenchDatabase;
use on_off::{compare, server_config, Shape, Target};

const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "k2:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

fn codec(keys: &str) -> PayloadCodec {
    PayloadCodec::new(Keyring::parse(keys).unwrap())
}

#[tokio::main]
async fn main() {
    let shape = Shape::from_args();
    let database = BenchDatabase::create(&shape.backend).await;
    let config = server_config();
    let shutdown = CancellationToken::new();
    let mut servers = Vec::new();
    let mut bases = Vec::new();
    for keys in ["", K1] {
        let store =
            store::connect_with(&database.url, config.store_options(codec(keys))).await.unwrap();
        let app = Application::with_store(&config, store).await.unwrap();
        bases.push(format!("http://{}", app.local_addr().unwrap()));
        servers.push(tokio::spawn(app.run(shutdown.clone())));
    }
    compare(
        [
            Target { label: "plain    ", base: &bases[0], authorization: None },
            Target { label: "encrypted", base: &bases[1], authorization: None },
        ],
        &shape,
    )
    .await;
    shutdown.cancel();
    for server in servers {
        server.await.unwrap().unwrap();
    }

    // Everything written above, plain or under k1, rewritten under k2.
    let options = store::Options { codec: codec(&format!("{K2},{K1}")), ..store::Options::new(4) };
    let store = store::connect_with(&database.url, options).await.unwrap();
    let started = Instant::now();
    let rewritten = store.reencrypt(1000, &|_| {}).await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "reencrypt: {rewritten} values in {elapsed:.2} s, {:.0} values/s",
        rewritten as f64 / elapsed
    );
    database.drop().await;
}
