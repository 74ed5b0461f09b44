//! `agent-sessions reencrypt`: every stored value under the newest key, with progress
//! on the terminal (a bar) or in a log (a line per batch).

use std::io::IsTerminal;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};

use crate::config::{describe_database, Config};
use crate::store::{self, Progress};

pub async fn run(config: &Config, batch: u64) -> anyhow::Result<()> {
    let codec = config.payload_codec()?;
    let Some(current) = codec.key_ids().into_iter().next() else {
        anyhow::bail!("ENCRYPTION_KEYS is not set: there is no key to encrypt under");
    };
    let url = config.database_url();
    let options = store::Options { codec, ..store::Options::new(2) };
    let store = store::connect_with(url, options)
        .await
        .with_context(|| format!("cannot open the database {}", describe_database(url)))?;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{msg:28} {bar:40} {pos}/{len} ({per_sec}, {eta})")
                .expect("a valid template"),
        );
        bar
    });
    let report = |p: Progress| match &bar {
        Some(bar) => {
            bar.set_message(p.column);
            bar.set_length(p.total);
            bar.set_position(p.done);
        }
        None => eprintln!("reencrypt: {} {}/{}", p.column, p.done, p.total),
    };
    let rewritten = store
        .reencrypt(batch as usize, &report)
        .await
        .map_err(|error| anyhow::anyhow!("{error}"))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    eprintln!("reencrypt: {rewritten} values rewritten; every value is now under `{current}`");
    Ok(())
}
