//! `keel debug prompt [run flags…]`: what a run with these flags would send the model (the
//! system prompt and tools, and the context files behind it), without running it; `keel debug
//! sandbox`. Each takes only the run flags that shape what it prints: the others are hidden
//! from its help and refused ([`refuse_what_does_not_apply`]).

use super::Logs;
use crate::cli::args::Cli;
use crate::cli::Keel;
use crate::exit::Exit;

/// `keel debug …`.
#[derive(Debug, clap::Subcommand)]
pub enum DebugCommand {
    /// Print the system prompt and tools a run with these flags would send, and the context
    /// files behind it.
    #[command(mut_args = only(PROMPT_FLAGS))]
    Prompt {
        #[command(flatten)]
        run: Box<Cli>,
    },
    /// Name the sandbox mechanism and the policy a run with these flags gets, and run a
    /// self-test (write outside, read a secret, connect out: each must be stopped).
    #[command(mut_args = only(SANDBOX_FLAGS))]
    Sandbox {
        #[command(flatten)]
        run: Box<Cli>,
    },
    /// Any other word: refused by [`unknown_debug`] with the list of valid ones.
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

/// The run flags (clap ids) that shape what `keel debug prompt` prints: the provider and model
/// (a model's tools and prompt), the tools, the permission mode (plan mode's tools), the system
/// prompt and context files, MCP servers (their tools) and the settings and trust behind them.
const PROMPT_FLAGS: &[&str] = &[
    "json",
    "provider",
    "model",
    "script",
    "base_url",
    "api_key",
    "tools",
    "permission",
    "system_prompt",
    "append_system_prompt",
    "no_context_files",
    "mcp_config",
    "strict_mcp_config",
    "no_mcp",
    "trust_project",
    "settings",
];

/// The run flags that shape `keel debug sandbox`'s sandbox.
const SANDBOX_FLAGS: &[&str] = &[
    "json",
    "sandbox",
    "sandbox_network",
    "sandbox_network_allow",
    "trust_project",
    "settings",
];

/// Hides from a debug command's help every run flag but `applies`.
fn only(applies: &'static [&'static str]) -> impl FnMut(clap::Arg) -> clap::Arg {
    move |arg| match applies.contains(&arg.get_id().as_str()) {
        true => arg,
        false => arg.hide(true),
    }
}

/// A usage error (exit 2) for a run flag (or prompt words) given to `keel debug prompt` or
/// `keel debug sandbox` that does not shape what it prints: it was silently ignored before.
pub fn refuse_what_does_not_apply(matches: &clap::ArgMatches) -> Result<(), clap::Error> {
    use clap::parser::ValueSource;
    use clap::CommandFactory;
    let Some(("debug", debug)) = matches.subcommand() else {
        return Ok(());
    };
    let (name, given, applies) = match debug.subcommand() {
        Some(("prompt", m)) => ("prompt", m, PROMPT_FLAGS),
        Some(("sandbox", m)) => ("sandbox", m, SANDBOX_FLAGS),
        _ => return Ok(()),
    };
    let Some(id) = given.ids().map(|id| id.as_str()).find(|id| {
        !applies.contains(id) && given.value_source(id) == Some(ValueSource::CommandLine)
    }) else {
        return Ok(());
    };
    let mut root = Keel::command();
    root.build();
    let Some(cmd) = root
        .find_subcommand_mut("debug")
        .and_then(|d| d.find_subcommand_mut(name))
    else {
        return Ok(());
    };
    let spelled = |a: &clap::Arg| match a.get_long() {
        Some(long) => format!("--{long}"),
        None => a.get_id().as_str().to_uppercase(),
    };
    let what = cmd
        .get_arguments()
        .find(|a| a.get_id() == id)
        .map(spelled)
        .unwrap_or_else(|| id.to_string());
    let valid: Vec<String> = cmd
        .get_arguments()
        .filter(|a| applies.contains(&a.get_id().as_str()) && !a.is_hide_set())
        .map(spelled)
        .collect();
    let message = format!(
        "{what} does not apply to `keel debug {name}`\n\n  [what does: {}]",
        valid.join(", ")
    );
    Err(cmd.error(clap::error::ErrorKind::ArgumentConflict, message))
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
        let settings = crate::cli::invocation::settings(&cli, env)?;
        let text = crate::setup::debug_prompt(&settings, env, cli.json).await?;
        Ok(match out.out(text.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Exit::Success,
            Err(_) => out.stdout_exit(),
        })
    })
}
