use agent_sessions::app::{shutdown_on_signal, Application};
use agent_sessions::config::{describe_database, Cli, Command};
use agent_sessions::{store, telemetry};
use anyhow::Context as _;
use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    telemetry::init(cli.config.log_format);
    tracing::debug!(config = ?cli.config, "starting");
    match cli.command.unwrap_or(Command::Serve) {
        Command::Migrate => {
            let url = cli.config.database_url();
            store::connect(url, 1).await.with_context(|| {
                format!("cannot migrate the database {}", describe_database(url))
            })?;
            tracing::info!("migrations applied");
        }
        Command::Serve => {
            let shutdown = shutdown_on_signal();
            Application::build(&cli.config).await?.run(shutdown).await?;
        }
    }
    Ok(())
}
