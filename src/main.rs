use agent_sessions::app::{shutdown_on_signal, Application};
use agent_sessions::config::{describe_database, Cli, Command, KeysCommand};
use agent_sessions::http::api_keys::issue_key;
use agent_sessions::{store, telemetry};
use anyhow::Context as _;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let telemetry = telemetry::init(cli.config.log_format)?;
    tracing::debug!(config = ?cli.config, "starting");
    let result = run(cli).await;
    telemetry.shutdown().await;
    result
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            let url = cli.config.database_url();
            store::connect(url, 1).await.with_context(|| {
                format!("cannot migrate the database {}", describe_database(url))
            })?;
            tracing::info!("migrations applied");
        }
        Command::Keys(KeysCommand::Create { tenant, name, scopes }) => {
            let url = cli.config.database_url();
            let store = store::connect(url, 1)
                .await
                .with_context(|| format!("cannot open the database {}", describe_database(url)))?;
            let scopes = (!scopes.is_empty()).then(|| {
                scopes
                    .iter()
                    .map(|scope| serde_json::from_value(serde_json::json!(scope)))
                    .collect::<Result<Vec<_>, _>>()
            });
            let scopes = scopes.transpose().context("--scopes: read or write")?;
            let (key, secret) = issue_key(&*store, tenant, name, scopes, None)
                .await
                .map_err(|error| anyhow::anyhow!("{error}"))?;
            eprintln!(
                "created API key {} ({}) for tenant `{}`; it is shown only this once:",
                key.id, key.name, key.tenant
            );
            println!("{secret}");
        }
        Command::Reencrypt { batch } => {
            agent_sessions::reencrypt::run(&cli.config, batch).await?;
        }
        Command::Serve => {
            let shutdown = shutdown_on_signal();
            Application::build(&cli.config).await?.run(shutdown).await?;
        }
    }
    Ok(())
}
