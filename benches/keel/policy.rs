//! The permission-rule rows of the bench (KEEL_BENCH_ONLY=policy): one check of 200 rules
//! against a 1 KB compound command (split with tree-sitter-bash, every part matched), against
//! an in-process tool turn (scripted provider, one `bash` call running that command, the
//! answer) without rules and with them. The goal: the check costs ≤ 2% of the tool turn.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::kernel::event::EventPayload;
use keel::kernel::policy::{Rules, Verdict};
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::{AgentConfig, AgentSession, Bus, Clock, Permission};
use serde_json::json;

use super::{median, Res, Row};

/// Checks timed per sample.
const CHECKS: usize = 1000;
/// Tool turns timed per sample.
const TURNS: usize = 20;

/// A compound command of at least 1 KB: lists, pipelines, `$(…)`, quotes; harmless to run.
fn command() -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < 1024 {
        s.push_str(&format!(
            "echo \"step {i}\" && printf '%s\\n' a{i} | cat > /dev/null; test -n \"$(echo x{i})\"; "
        ));
        i += 1;
    }
    s.push_str("echo done");
    s
}

/// 200 rules: 60 deny and 40 ask rules that never match, 100 allow rules of which the last
/// four match (each part of the command scans every list).
fn rules(root: &Path) -> Res<Rules> {
    let origin = |r: String| (r, "/bench/.keel/settings.json".to_string());
    let deny: Vec<_> = (0..60)
        .map(|i| match i % 3 {
            0 => format!("Bash(rm{i}:*)"),
            1 => format!("Bash(curl * | sh{i})"),
            _ => format!("Read(./secret{i}/**)"),
        })
        .map(origin)
        .collect();
    let ask: Vec<_> = (0..40)
        .map(|i| origin(format!("Bash(git push{i}:*)")))
        .collect();
    let mut allow: Vec<_> = (0..96)
        .map(|i| origin(format!("Bash(tool{i} run *)")))
        .collect();
    for r in [
        "Bash(echo:*)",
        "Bash(printf *)",
        "Bash(cat)",
        "Bash(test:*)",
    ] {
        allow.push(origin(r.to_string()));
    }
    let (rules, warnings) = Rules::build(&deny, &ask, &allow, root, Path::new("/home/bench"));
    if !warnings.is_empty() {
        return Err(format!("bench rules do not parse: {warnings:?}"));
    }
    Ok(rules)
}

pub fn policy_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    eprintln!("[policy] 200 rules against a 1 KB compound command x{samples}");
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let cmd = command();
    let parts = cmd.matches("&&").count() + cmd.matches(';').count() + cmd.matches('|').count();
    let rules = Arc::new(rules(dir.path())?);
    let args = json!({ "command": cmd });
    match rules.check("bash", &args, dir.path()) {
        Verdict::Allow(_) => {}
        other => {
            return Err(format!(
                "the bench command should be allowed, got {other:?}"
            ))
        }
    }
    let mut check_us = Vec::new();
    for _ in 0..samples {
        let start = Instant::now();
        for _ in 0..CHECKS {
            std::hint::black_box(rules.check("bash", std::hint::black_box(&args), dir.path()));
        }
        check_us.push(start.elapsed().as_secs_f64() * 1e6 / CHECKS as f64);
    }
    let mut bare_ms = Vec::new();
    let mut ruled_ms = Vec::new();
    for _ in 0..samples {
        bare_ms.push(tool_turn(dir.path(), &cmd, Arc::default())?);
        ruled_ms.push(tool_turn(dir.path(), &cmd, rules.clone())?);
    }
    rows.push(Row::stats(
        &format!(
            "permission rules: 200 rules against a {} B compound command (~{} simple commands), one check",
            cmd.len(),
            parts + 1
        ),
        &check_us,
        "µs",
        1,
    ));
    rows.push(Row::stats(
        "tool turn in-process (scripted; bash runs that command), no rules",
        &bare_ms,
        "ms",
        2,
    ));
    rows.push(Row::stats(
        "tool turn in-process, with the 200 rules (ask mode; the rules allow it)",
        &ruled_ms,
        "ms",
        2,
    ));
    rows.push(Row::single(
        "permission check as a share of the tool turn without rules (goal ≤ 2%)",
        median(&check_us) / 1e3 / median(&bare_ms) * 100.0,
        "%",
        2,
    ));
    Ok(())
}

/// The median wall time of [`TURNS`] prompts, each a `bash` call of `cmd` and an answer.
fn tool_turn(dir: &Path, cmd: &str, rules: Arc<Rules>) -> Res<f64> {
    let turns: Vec<_> = (0..TURNS)
        .flat_map(|i| {
            let m = format!("^p{i}$");
            [
                json!({"match": m, "chunks": [{"toolCall": {"id": format!("c{i}"), "name": "bash", "arguments": {"command": cmd}}}]}),
                json!({"match": m, "chunks": [{"text": "ok"}]}),
            ]
        })
        .collect();
    let provider = ScriptedProvider::from_script(
        serde_json::from_value(json!({ "turns": turns })).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let mut c = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    // With rules the command is allowed; without, auto runs it: both run without a dialog.
    c.permission = if rules.is_empty() {
        Permission::Auto
    } else {
        Permission::Ask
    };
    c.rules = rules;
    let clock = Clock::new(None, None);
    let s = AgentSession::new(
        c,
        Arc::new(provider),
        Bus::new(clock.clone()),
        clock,
        Vec::new(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut times = Vec::new();
        for i in 0..TURNS {
            let mut rx = s.subscribe();
            let start = Instant::now();
            let run = s.prompt(format!("p{i}")).map_err(|e| format!("{e:?}"))?;
            while let Some(ev) = rx.recv().await {
                if let EventPayload::ToolCallFinished { result, .. } = &ev.payload {
                    if result.is_error {
                        return Err(format!("the bench tool call failed: {}", result.text()));
                    }
                }
                if matches!(ev.payload, EventPayload::AgentSettled { .. }) {
                    break;
                }
            }
            run.await.map_err(|e| e.to_string())?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        Ok(median(&times))
    })
}
