//! `keel config …`: the settings files a run in this directory reads (`DESIGN.md` §13). One
//! file per command: `show` (the merged values and where each came from), `path` (the files
//! looked at), `schema` (the JSON Schema of a file).

pub mod path;
pub mod schema;
pub mod show;

use crate::exit::Exit;

/// `keel config`'s commands.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// The merged settings of this directory, each value with the file (or flag) it came from.
    Show(show::ShowArgs),
    /// The settings files a run in this directory looks at, highest level first, and which
    /// exist.
    Path(path::PathArgs),
    /// The JSON Schema of a settings file.
    Schema,
}

/// Runs one `keel config` command.
pub fn run(command: ConfigCommand) -> Exit {
    match command {
        ConfigCommand::Show(args) => show::run(args),
        ConfigCommand::Path(args) => path::run(args),
        ConfigCommand::Schema => schema::run(),
    }
}
