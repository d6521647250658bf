//! `keel config schema`: the JSON Schema of a settings file, on stdout (point an editor's
//! `$schema` at it).

use super::super::{print, Logs};
use crate::exit::Exit;

/// `keel config schema`.
pub fn run() -> Exit {
    super::super::run(Logs::Off, async move |_env, out| {
        print(out, &crate::settings::schema::text())
    })
}
