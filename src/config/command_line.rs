//! The command line as clap reads it, with each command's help showing only the options
//! that command reads.

use clap::{CommandFactory as _, FromArgMatches as _};

use super::Cli;

/// The options every command reads; the others only `serve` does.
const SHARED_OPTIONS: [&str; 5] = [
    "database_url",
    "database_max_connections",
    "database_timeout_secs",
    "log_format",
    "encryption_keys",
];

impl Cli {
    /// Reads the command line and the environment. The help of a command other than
    /// `serve` lists only the options it reads, though it still accepts every one.
    pub fn from_command_line() -> Self {
        let matches = Self::focused().get_matches();
        Self::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
    }

    /// The command line with `serve`'s own options hidden from the other commands: each
    /// is given a hidden copy, which the copy of the global option then does not replace.
    fn focused() -> clap::Command {
        let command = Self::command();
        let serve_only: Vec<clap::Arg> = command
            .get_arguments()
            .filter(|arg| arg.is_global_set() && !SHARED_OPTIONS.contains(&arg.get_id().as_str()))
            .map(|arg| arg.clone().hide(true))
            .collect();
        let others: Vec<String> = command
            .get_subcommands()
            .map(|sub| sub.get_name().to_owned())
            .filter(|name| name != "serve")
            .collect();
        others.iter().fold(command, |command, name| {
            command.mut_subcommand(name, |sub| sub.args(serve_only.iter().cloned()))
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::FromArgMatches as _;

    use super::*;

    fn help_of(args: &[&str]) -> String {
        let error = Cli::focused().try_get_matches_from(args).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::DisplayHelp);
        error.to_string()
    }

    #[test]
    fn only_serve_lists_the_options_of_serving() {
        for command in [&["migrate"][..], &["reencrypt"], &["keys"], &["keys", "list"]] {
            let args = [&["agent-sessions"][..], command, &["--help"]].concat();
            let help = help_of(&args);
            assert!(help.contains("--database-url"), "{command:?}: {help}");
            assert!(
                !help.contains("--listen") && !help.contains("--llm-model"),
                "{command:?}: {help}"
            );
        }
        for serving in [&["agent-sessions", "--help"][..], &["agent-sessions", "serve", "--help"]] {
            let help = help_of(serving);
            assert!(help.contains("--listen") && help.contains("--database-url"), "{help}");
        }
        // Still accepted, as the environment gives them to every command.
        let matches = Cli::focused()
            .try_get_matches_from(["agent-sessions", "migrate", "--request-timeout-secs", "7"])
            .unwrap();
        assert_eq!(Cli::from_arg_matches(&matches).unwrap().config.request_timeout_secs, 7);
    }
}
