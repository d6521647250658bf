//! Which flags of a `session/open` a live session did not take (issue 27 §13): the flags that
//! shape a session, given now with values other than those it was opened with. Flags that pick
//! the session, or only concern the client and its output, are never compared. Reads flags
//! with clap only; knows nothing of sessions.

use std::collections::BTreeMap;
use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::CommandFactory;

use crate::cli::args::Cli;

/// Long names of the flags that pick a session or only concern the client (`--model` and the
/// like are compared; so is a flag added later, unless it is listed here).
const NOT_COMPARED: &[&str] = &[
    "continue",
    "resume",
    "session",
    "session-id",
    "no-session",
    "fork",
    "session-dir",
    "export",
    "list-models",
    "print",
    "mode",
    "json",
    "rpc",
    "acp",
    "color",
    "ambiguous-width",
    "quiet",
    "daemon",
    "no-daemon",
    "detach",
    "wait",
    "socket",
    "remote",
    "ssh-opt",
    "remote-keel",
    "cwd",
    "help",
    "version",
];

/// The flags of `now` (as `--name`, in name order) that set something other than `then` did:
/// given now, and absent from `then` or given there with other values. Nothing when either
/// command line does not parse.
pub fn unapplied(then: &[String], now: &[String]) -> Vec<String> {
    let (Some(then), Some(now)) = (given(then), given(now)) else {
        return Vec::new();
    };
    now.into_iter()
        .filter(|(name, values)| then.get(name) != Some(values))
        .map(|(name, _)| format!("--{name}"))
        .collect()
}

/// The compared flags given on a command line (without `keel`), with their values as written.
fn given(args: &[String]) -> Option<BTreeMap<String, Vec<OsString>>> {
    let cmd = Cli::command();
    let argv = std::iter::once("keel".to_string()).chain(args.iter().cloned());
    let matches = cmd
        .clone()
        .try_get_matches_from(crate::cli::args::normalize(argv))
        .ok()?;
    let mut out = BTreeMap::new();
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long().filter(|l| !NOT_COMPARED.contains(l)) else {
            continue;
        };
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let values = match matches.try_get_raw(id) {
            Ok(Some(raw)) => raw.map(|v| v.to_os_string()).collect(),
            _ => Vec::new(),
        };
        out.insert(long.to_string(), values);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn only_flags_given_now_with_other_values_are_named() {
        let then = args("--provider scripted --model a --thinking low --tools read,bash hi");
        let now = args("--continue --provider scripted --model b --tools read,bash --max-turns 3");
        assert_eq!(unapplied(&then, &now), ["--max-turns", "--model"]);
        // Not given now (the live session's own value stands): no disagreement.
        assert!(unapplied(&then, &args("--continue")).is_empty());
        assert!(unapplied(&then, &then).is_empty());
    }

    #[test]
    fn flags_that_pick_the_session_or_concern_the_client_are_not_compared() {
        let then = args("--session-id x");
        let now = args("--resume x --quiet --color never --session-dir /d other words");
        assert!(unapplied(&then, &now).is_empty());
    }
}
