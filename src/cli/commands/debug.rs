//! `keel debug prompt [run flags…]`: what a run with these flags would send the model (the
//! system prompt and tools, and the context files behind it), without running it.

use super::Logs;
use crate::cli::args::Cli;
use crate::cli::Keel;
use crate::exit::Exit;

/// `keel debug …`.
#[derive(Debug, clap::Subcommand)]
pub enum DebugCommand {
    /// Print the system prompt and tools a run with these flags would send, and the context
    /// files behind it.
    Prompt {
        #[command(flatten)]
        run: Box<Cli>,
    },
    /// Name the sandbox mechanism and the policy a run with these flags gets, and run a
    /// self-test (write outside, read a secret, connect out: each must be stopped).
    Sandbox {
        #[command(flatten)]
        run: Box<Cli>,
    },
    /// Any other word: refused by [`unknown_debug`] with the list of valid ones.
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

/// The usage error (exit 2) for `keel debug WORD` with an unknown WORD: it names the valid
/// debug commands.
pub fn unknown_debug(words: &[String]) -> clap::Error {
    use clap::CommandFactory;
    let word = words.first().map(String::as_str).unwrap_or_default();
    let mut root = Keel::command();
    root.build();
    let Some(debug) = root.find_subcommand_mut("debug") else {
        return root.error(
            clap::error::ErrorKind::InvalidSubcommand,
            "no debug commands",
        );
    };
    let valid: Vec<&str> = debug
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|n| *n != "help")
        .collect();
    let message = format!(
        "unrecognized debug command '{word}'\n\n  [debug commands: {}]",
        valid.join(", ")
    );
    debug.error(clap::error::ErrorKind::InvalidSubcommand, message)
}

/// `keel debug …`: `prompt` prints; any other word is a usage error (`args`: the command line,
/// for its JSON result line).
pub fn run(command: DebugCommand, args: &[String]) -> Exit {
    match command {
        DebugCommand::Prompt { run } => prompt(*run),
        DebugCommand::Sandbox { run } => super::sandbox::debug(*run),
        DebugCommand::Unknown(words) => crate::cli::clap_exit(unknown_debug(&words), args),
    }
}

/// `keel debug prompt [--json] [run flags…]`: the system prompt and tools a run with those
/// flags would send, and the context files behind it. No logs.
fn prompt(cli: Cli) -> Exit {
    super::run(Logs::Off, async move |env, out| {
        let settings = crate::setup::Settings::resolve(&cli, env)?;
        let text = crate::setup::debug_prompt(&settings, env, cli.json).await?;
        Ok(match out.out(text.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        })
    })
}
