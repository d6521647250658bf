//! `keel man`: keel's man page, rendered by `clap_mangen` from the command line's own
//! definitions, on stdout (`keel man > keel.1; man -l keel.1`). `docs/keel.1` is this output,
//! kept equal by a test. No environment is read: it works before any set-up.

use super::print;
use crate::exit::Exit;
use crate::output::{ColorChoice, Output};

/// `keel man`.
pub fn run() -> Exit {
    let mut out = Output::stdio(ColorChoice::Never);
    match page() {
        Ok(text) => print(&mut out, &text).unwrap_or(Exit::Internal),
        Err(e) => {
            out.err(&format!("Error: cannot render the man page: {e}\n"));
            Exit::Internal
        }
    }
}

/// The man page (roff) of `keel` and its subcommands' list.
pub fn page() -> std::io::Result<String> {
    use clap::CommandFactory;
    let mut buf = Vec::new();
    clap_mangen::Man::new(crate::cli::Keel::command()).render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
