//! The command line's session flags resolved, once, into the typed [`SessionSpec`] every
//! front end opens its session with (in this process or through the daemon): a file the flags
//! name for its text (`--append-system-prompt FILE`) is read here, in the directory keel was
//! started in; a key given on the command line is named by the variable it is handed over in,
//! never carried in the spec.

use crate::cli::args::{Cli, PermissionFlag, ThinkingFlag};
use crate::error::StartupError;
use crate::kernel::agent::{Permission, Thinking};
use crate::kernel::sandbox::{HostPattern, Network, SandboxMode};
use std::path::Path;

use crate::wire::protocol::spec::{
    KeySource, McpSpec, SessionPick, SessionSpec, SettingsLayer, TrustSpec, WorktreeSpec,
};

/// The variable a key given with `--api-key` is handed to the session in (in this process's
/// environment, or `session/open`'s `keys`): never stored, never seen by tools.
pub const API_KEY_VAR: &str = "KEEL_API_KEY";

/// The flags of a run given as words (without `keel`), as clap reads them (`argv` set): a
/// usage error names the first problem.
pub fn parse_argv(args: &[String]) -> Result<Cli, StartupError> {
    use clap::Parser;
    let argv = std::iter::once("keel".to_string()).chain(args.iter().cloned());
    let mut cli = Cli::try_parse_from(crate::cli::args::normalize(argv)).map_err(|e| {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or("bad arguments").to_string();
        StartupError::usage(first.trim_start_matches("error: ").to_string())
    })?;
    cli.argv = args.to_vec();
    Ok(cli)
}

/// The spec of a version-1 scheduled task's flags (`schedule::ArgvToSpec`).
pub fn from_task_args(
    args: &[String],
    cwd: &Path,
) -> Result<SessionSpec, crate::schedule::ScheduleError> {
    let failed = |e: StartupError| {
        crate::schedule::ScheduleError::new(crate::schedule::ScheduleErrorKind::Flags, e.message)
    };
    let cli = parse_argv(args).map_err(failed)?;
    of(&cli, cwd).map_err(failed)
}

/// The session spec of `cli` in the directory `cwd` (where files the flags name for their text
/// are read). Several flags that each pick a session are a usage error, as is a file that
/// cannot be read.
pub fn of(cli: &Cli, cwd: &Path) -> Result<SessionSpec, StartupError> {
    Ok(SessionSpec {
        session: pick(cli)?,
        session_dir: cli.session_dir.clone(),
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        script: cli.script.clone(),
        api_key: cli
            .api_key
            .as_ref()
            .map(|_| KeySource::Env(API_KEY_VAR.into())),
        base_url: cli.base_url.clone(),
        max_retries: cli.max_retries,
        connect_timeout: cli.connect_timeout,
        idle_timeout: cli.idle_timeout,
        thinking: cli.thinking.map(thinking_of),
        tools: cli.tools.clone(),
        max_turns: cli.max_turns,
        max_repeated_failures: cli.max_repeated_failures,
        max_cost: cli.max_cost,
        permission: cli.permission.map(permission_of),
        rules: Default::default(),
        approval_timeout: cli.approval_timeout,
        auto_compaction: cli.no_auto_compaction.then_some(false),
        system_prompt: cli.system_prompt.clone(),
        append_system_prompt: appended(&cli.append_system_prompt, cwd)?,
        context_files: cli.no_context_files.then_some(false),
        mcp: McpSpec {
            config: cli.mcp_config.clone(),
            strict: cli.strict_mcp_config,
            enabled: !cli.no_mcp,
        },
        settings: SettingsLayer::of_flag(cli.settings.as_deref()),
        claude_files: cli.no_claude_files.then_some(false),
        output_schema: cli.output_schema.clone(),
        sandbox: cli.sandbox.as_deref().and_then(SandboxMode::from_name),
        network: network(cli)?,
        trust: TrustSpec {
            project: cli.trust_project,
            allow_home: cli.allow_home,
        },
        agent: None,
        worktree: cli.worktree.as_ref().map(|n| WorktreeSpec {
            name: Some(n.clone()).filter(|n| !n.is_empty()),
        }),
    })
}

/// The key `--api-key` gave, as `(variable, value)` for the session's environment.
pub fn key(cli: &Cli) -> Option<(String, String)> {
    cli.api_key
        .as_ref()
        .map(|k| (API_KEY_VAR.to_string(), k.clone()))
}

/// The session the flags pick; more than one is a usage error.
fn pick(cli: &Cli) -> Result<SessionPick, StartupError> {
    let mut picks: Vec<(SessionPick, &str)> = Vec::new();
    if cli.continue_ {
        picks.push((SessionPick::Continue, "--continue"));
    }
    if let Some(r) = &cli.resume {
        picks.push((SessionPick::Resume(r.clone()), "--resume"));
    }
    if let Some(s) = &cli.session {
        picks.push((SessionPick::File(s.clone()), "--session"));
    }
    if let Some(id) = &cli.session_id {
        picks.push((SessionPick::Id(id.clone()), "--session-id"));
    }
    if cli.no_session {
        picks.push((SessionPick::Memory, "--no-session"));
    }
    if let Some(f) = &cli.fork {
        picks.push((SessionPick::Fork(f.clone()), "--fork"));
    }
    match picks.len() {
        0 => Ok(SessionPick::New),
        1 => Ok(picks.remove(0).0),
        _ => {
            let names: Vec<&str> = picks.iter().map(|(_, n)| *n).collect();
            Err(
                StartupError::usage(format!("{} cannot be used together", names.join(" and ")))
                    .hint("choose one way to pick the session"),
            )
        }
    }
}

/// `--append-system-prompt` values as text: a value naming a file of this directory is its
/// contents.
fn appended(values: &[String], cwd: &Path) -> Result<Vec<String>, StartupError> {
    values
        .iter()
        .map(|extra| {
            let path = cwd.join(extra);
            match path.is_file() {
                true => std::fs::read_to_string(&path).map_err(|e| {
                    StartupError::config(format!("cannot read {}", path.display()))
                        .cause(e.to_string())
                }),
                false => Ok(extra.clone()),
            }
        })
        .collect()
}

/// The network `--sandbox-network on|off` and `--sandbox-network-allow HOST` ask for (`None`:
/// the settings'); they beat `sandbox.network`: `on` wins, any allowed host makes an allowlist.
fn network(cli: &Cli) -> Result<Option<Network>, StartupError> {
    let allow = cli
        .sandbox_network_allow
        .iter()
        .map(|h| HostPattern::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StartupError::usage(e.to_string()))?;
    Ok(match cli.sandbox_network.as_deref() {
        Some("on") => Some(Network::On),
        _ if !allow.is_empty() => Some(Network::Allow(allow)),
        Some(_) => Some(Network::Off),
        None => None,
    })
}

fn thinking_of(t: ThinkingFlag) -> Thinking {
    match t {
        ThinkingFlag::Off => Thinking::Off,
        ThinkingFlag::Minimal => Thinking::Minimal,
        ThinkingFlag::Low => Thinking::Low,
        ThinkingFlag::Medium => Thinking::Medium,
        ThinkingFlag::High => Thinking::High,
        ThinkingFlag::Xhigh => Thinking::Xhigh,
    }
}

/// keel's permission mode for `--permission`'s value.
pub fn permission_of(p: PermissionFlag) -> Permission {
    match p {
        PermissionFlag::Auto => Permission::Auto,
        PermissionFlag::ReadOnly => Permission::ReadOnly,
        PermissionFlag::Ask => Permission::Ask,
        PermissionFlag::AcceptEdits => Permission::AcceptEdits,
        PermissionFlag::Plan => Permission::Plan,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn spec(args: &[&str]) -> Result<SessionSpec, StartupError> {
        let mut cli = Cli::try_parse_from(std::iter::once("keel").chain(args.iter().copied()))
            .expect("parses");
        cli.argv = args.iter().map(|s| s.to_string()).collect();
        of(&cli, Path::new("/"))
    }

    #[test]
    fn flags_become_typed_fields_and_defaults_stay_unset() {
        let s = spec(&["--model", "m", "--permission", "ask", "-p", "hi"]).unwrap();
        assert_eq!(s.model.as_deref(), Some("m"));
        assert_eq!(s.permission, Some(Permission::Ask));
        // `--max-retries` was not given: the session's side decides (its default, 3).
        assert_eq!(s.max_retries, None);
        let s = spec(&["--max-retries=0", "--api-key", "sk-secret"]).unwrap();
        assert_eq!(s.max_retries, Some(0));
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("sk-secret"),
            "the key is never in the spec: {text}"
        );
        assert_eq!(s.api_key, Some(KeySource::Env(API_KEY_VAR.into())));
    }

    #[test]
    fn two_picks_are_a_usage_error() {
        let e = spec(&["--continue", "--session-id", "x"]).unwrap_err();
        assert_eq!(
            e.message,
            "--continue and --session-id cannot be used together"
        );
        assert_eq!(spec(&["-c"]).unwrap().session, SessionPick::Continue);
    }
}
