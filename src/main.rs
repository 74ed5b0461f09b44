use agent_sessions::app::{shutdown_on_signal, Application};
use agent_sessions::config::{describe_database, Cli, Command};
use agent_sessions::{key_commands, store, telemetry};
use anyhow::Context as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::from_command_line();
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
        Command::Keys(command) => key_commands::run(&cli.config, command).await?,
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
