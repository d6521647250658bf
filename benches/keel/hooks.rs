//! The hook rows of the bench (KEEL_BENCH_ONLY=hooks): 20 in-process tool turns (scripted
//! provider, one `bash` call of `true` each) with one `PreToolUse` and one `PostToolUse` hook
//! of `true`, against the same 20 turns without hooks plus 40 spawns of `sh -c true` (the bare
//! cost of starting those hook processes), measured in the same sample, paired. The goal: the
//! hooked turns cost ≤ 1.15x the turns without hooks plus the spawns.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::kernel::event::EventPayload;
use keel::kernel::hooks::{HookConfig, HookEnv, Hooks, SessionFields};
use keel::kernel::provider::scripted::ScriptedProvider;
use keel::kernel::tool::ToolEnv;
use keel::{AgentConfig, AgentSession, Bus, Clock, Permission};
use serde_json::json;

use super::{median, Res, Row};

/// Tool turns per sample.
const TURNS: usize = 20;

pub fn hooks_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    eprintln!(
        "[hooks] {TURNS} tool turns with a PreToolUse and a PostToolUse hook of `true`, x{samples}"
    );
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let (mut bare_ms, mut hooked_ms, mut spawn_ms, mut ratio) = (vec![], vec![], vec![], vec![]);
    for _ in 0..samples {
        let bare = turns(dir.path(), false)?;
        let spawns = spawn_true(2 * TURNS)?;
        let hooked = turns(dir.path(), true)?;
        ratio.push(hooked / (bare + spawns));
        bare_ms.push(bare);
        spawn_ms.push(spawns);
        hooked_ms.push(hooked);
    }
    rows.push(Row::stats(
        &format!("{TURNS} tool turns in-process (scripted; bash runs `true`), no hooks"),
        &bare_ms,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("{} spawns of `sh -c true` (output captured)", 2 * TURNS),
        &spawn_ms,
        "ms",
        1,
    ));
    rows.push(Row::stats(
        &format!("{TURNS} tool turns with a PreToolUse and a PostToolUse hook of `true`"),
        &hooked_ms,
        "ms",
        1,
    ));
    rows.push(Row::single(
        "hooked turns / (turns without hooks + the spawns), median of paired samples (goal ≤ 1.15x)",
        median(&ratio),
        "x",
        3,
    ));
    Ok(())
}

/// Milliseconds for `n` spawns of `sh -c true`, stdin closed, stdout and stderr read.
fn spawn_true(n: usize) -> Res<f64> {
    let start = Instant::now();
    for _ in 0..n {
        let out = Command::new("sh")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("sh: {e}"))?;
        if !out.status.success() {
            return Err("sh -c true failed".into());
        }
    }
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

fn session(dir: &Path, hooked: bool) -> Res<AgentSession> {
    let script: Vec<_> = (0..TURNS)
        .flat_map(|i| {
            let m = format!("^p{i}$");
            [
                json!({"match": m, "chunks": [{"toolCall": {"id": format!("c{i}"), "name": "bash", "arguments": {"command": "true"}}}]}),
                json!({"match": m, "chunks": [{"text": "ok"}]}),
            ]
        })
        .collect();
    let provider = ScriptedProvider::from_script(
        serde_json::from_value(json!({ "turns": script })).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let mut c = AgentConfig::new(dir.to_path_buf(), dir.to_path_buf());
    c.bash_timeout = Duration::from_secs(30);
    c.permission = Permission::Auto;
    if hooked {
        let hook = json!([{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}]);
        let (config, warnings) = HookConfig::parse(
            &json!({"PreToolUse": hook, "PostToolUse": hook}),
            "bench settings",
        );
        if !warnings.is_empty() {
            return Err(format!("bench hooks: {warnings:?}"));
        }
        let env = HookEnv {
            cwd: dir.to_path_buf(),
            project_dir: dir.to_path_buf(),
            tool_env: ToolEnv::new(vec![]),
            temp_dir: dir.to_path_buf(),
            readable: Vec::new(),
        };
        c.hooks = Some(Hooks::new(config, env, SessionFields::default()));
    }
    let clock = Clock::new(None, None);
    Ok(AgentSession::new(
        c,
        Arc::new(provider),
        Bus::new(clock.clone()),
        clock,
        Vec::new(),
    ))
}

/// Milliseconds for [`TURNS`] prompts, each a `bash` call of `true` and an answer; with
/// `hooked`, each call also runs both hooks (counted: two `hook_finished` per turn).
fn turns(dir: &Path, hooked: bool) -> Res<f64> {
    let s = session(dir, hooked)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut hooks_run = 0;
        let start = Instant::now();
        for i in 0..TURNS {
            let mut rx = s.subscribe();
            let run = s.prompt(format!("p{i}")).map_err(|e| format!("{e:?}"))?;
            while let Some(ev) = rx.recv().await {
                match &ev.payload {
                    EventPayload::ToolCallFinished { result, .. } if result.is_error => {
                        return Err(format!("the bench tool call failed: {}", result.text()));
                    }
                    EventPayload::AgentSettled { .. } => break,
                    EventPayload::HookFinished { .. } => hooks_run += 1,
                    _ => {}
                }
            }
            run.await.map_err(|e| e.to_string())?;
        }
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        let want = if hooked { 2 * TURNS } else { 0 };
        if hooks_run != want {
            return Err(format!("{hooks_run} hooks ran, not {want}"));
        }
        Ok(elapsed)
    })
}
