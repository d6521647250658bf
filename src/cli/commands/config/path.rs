//! `keel config path [--settings FILE|JSON]`: the settings files a run in this directory looks
//! at, highest level first, each with whether it exists.

use super::super::{print, Logs};
use crate::exit::Exit;
use crate::settings::{Inline, Source};

/// `keel config path`'s flags.
#[derive(Debug, clap::Args)]
pub struct PathArgs {
    /// Settings above the project's, as a run's `--settings` gives them.
    #[arg(long, value_name = "FILE|JSON")]
    settings: Option<String>,
}

/// `keel config path`: one line per level.
pub fn run(args: PathArgs) -> Exit {
    super::super::run(Logs::Off, async move |env, out| {
        let inline = args.settings.as_deref().map(|v| Inline::of(v, &env.cwd));
        let sources = crate::setup::settings::sources(inline.as_ref(), env);
        print(out, &table(&sources))
    })
}

/// `LEVEL  PATH  (exists|not found)` lines.
fn table(sources: &[Source]) -> String {
    let mut s = String::new();
    for src in sources {
        let (place, state) = match &src.path {
            Some(p) => (
                p.display().to_string(),
                if src.exists() { "exists" } else { "not found" },
            ),
            None => ("(inline JSON)".to_string(), "given"),
        };
        s.push_str(&format!("{:<14} {place}  ({state})\n", src.level.word()));
    }
    s
}
