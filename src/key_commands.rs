//! `agent-sessions keys`: create, list and revoke API keys straight in the database, for
//! the first key of a deployment and for an operator without the admin key at hand.

use anyhow::Context as _;
use uuid::Uuid;

use crate::config::{describe_database, Config, KeysCommand};
use crate::http::api_keys::issue_key;
use crate::model::{ApiKey, Order, PageRequest, Scope};
use crate::store::{self, SessionStore, StoreError};

pub async fn run(config: &Config, command: KeysCommand) -> anyhow::Result<()> {
    let url = config.database_url();
    let store = store::connect(url, 1)
        .await
        .with_context(|| format!("cannot open the database {}", describe_database(url)))?;
    match command {
        KeysCommand::Create { tenant, name, scopes } => create(&*store, tenant, name, scopes).await,
        KeysCommand::List { tenant } => list(&*store, tenant.as_deref()).await,
        KeysCommand::Revoke { key_id } => revoke(&*store, key_id).await,
    }
}

async fn create(
    store: &dyn SessionStore, tenant: String, name: String, scopes: Vec<String>,
) -> anyhow::Result<()> {
    let scopes = (!scopes.is_empty()).then(|| {
        scopes
            .iter()
            .map(|scope| serde_json::from_value(serde_json::json!(scope)))
            .collect::<Result<Vec<Scope>, _>>()
    });
    let scopes = scopes.transpose().context("--scopes: read or write")?;
    let (key, secret) = issue_key(store, tenant, name, scopes, None)
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    eprintln!(
        "created API key {} ({}) for tenant `{}`; it is shown only this once:",
        key.id, key.name, key.tenant
    );
    println!("{secret}");
    Ok(())
}

/// Prints every key, oldest first, one per line with tab-separated columns under a
/// header: what `cut` and `column -t` read.
async fn list(store: &dyn SessionStore, tenant: Option<&str>) -> anyhow::Result<()> {
    println!("id\ttenant\tname\tprefix\tscopes\tcreated_at\texpires_at\tlast_used_at");
    let mut page = Some(PageRequest::first(PageRequest::MAX_LIMIT, Order::Asc));
    while let Some(request) = page {
        let keys = store.list_api_keys(tenant, &request).await?;
        for key in &keys.data {
            println!("{}", line(key));
        }
        page = keys.next(&request);
    }
    Ok(())
}

fn line(key: &ApiKey) -> String {
    let scopes: Vec<&str> = key
        .scopes
        .iter()
        .map(|scope| match scope {
            Scope::Read => "read",
            Scope::Write => "write",
        })
        .collect();
    let time =
        |at: Option<chrono::DateTime<chrono::Utc>>| at.map_or("-".to_owned(), |t| t.to_rfc3339());
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        key.id,
        key.tenant,
        key.name.replace(['\t', '\n'], " "),
        key.prefix,
        scopes.join(","),
        key.created_at.to_rfc3339(),
        time(key.expires_at),
        time(key.last_used_at),
    )
}

/// Deletes the key. Replicas that looked it up in the last `AUTH_CACHE_SECS` still let
/// it in until their cache lapses.
async fn revoke(store: &dyn SessionStore, key_id: Uuid) -> anyhow::Result<()> {
    match store.delete_api_key(key_id).await {
        Ok(()) => {
            eprintln!("revoked API key {key_id}");
            Ok(())
        }
        Err(StoreError::ApiKeyNotFound) => anyhow::bail!("no API key with id `{key_id}`"),
        Err(other) => Err(other.into()),
    }
}
