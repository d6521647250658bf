//! `keel config show [--json] [--settings FILE|JSON]`: the merged settings of this directory,
//! each value with the file (or flag) it came from, and what Claude Code's files hold that keel
//! does not use; warnings about skipped entries on stderr.

use super::super::{print, Logs};
use crate::exit::Exit;

/// `keel config show`'s flags.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// One JSON object: each value as {"value", "origin"}.
    #[arg(long)]
    json: bool,
    /// Settings above the project's, as a run's `--settings` gives them.
    #[arg(long, value_name = "FILE|JSON")]
    settings: Option<String>,
}

/// `keel config show`: a file that does not parse is a config error (exit 3).
pub fn run(args: ShowArgs) -> Exit {
    super::super::run(Logs::Off, async move |env, out| {
        let loaded = crate::setup::settings::load(
            crate::wire::protocol::spec::SettingsLayer::of_flag(args.settings.as_deref()).as_ref(),
            env,
        )?;
        for w in &loaded.warnings {
            out.err(&format!("Warning: {w}\n"));
        }
        let text = match args.json {
            true => crate::settings::render_json(&loaded.merged, &loaded.ignored),
            false => crate::settings::render(&loaded.merged, &loaded.ignored),
        };
        print(out, &text)
    })
}
