//! The subagent rows of the bench (KEEL_BENCH_ONLY=subagent), in-process: opening a child
//! session through the host's spawner (what a `task` call does before its prompt: a session
//! served in its own actor, named) against opening a fresh session the same way (actor, status,
//! name), paired per sample (goal ≤ 1.2x); and a run whose one message starts four children
//! that each run `sleep 0.5` in the sandbox, prompt to settle (goal ≤ 0.7 s).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::host::actor::{self, Call};
use keel::host::models::Models;
use keel::host::stream::{Cursor, Delivery, Item};
use keel::host::subagent::{subagents, SubagentSetup};
use keel::host::HostSetup;
use keel::kernel::provider::model::Registry;
use keel::kernel::provider::scripted::{Script, ScriptedProvider};
use keel::kernel::provider::Provider;
use keel::kernel::session::{SessionHeader, Store};
use keel::kernel::subagent::{AgentDef, ChildRequest, ParentRef};
use keel::wire::rpc::Request;
use keel::{AgentConfig, Clock};
use serde_json::json;

use super::{median, Res, Row};

/// Opens timed per sample (children and fresh sessions alike).
const OPENS: usize = 50;

pub fn subagent_bench(rows: &mut Vec<Row>, samples: usize) -> Res<()> {
    eprintln!(
        "[subagent] {OPENS} child opens vs {OPENS} fresh opens, x{samples}; 4 children of 0.5 s"
    );
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let (mut fresh_ms, mut child_ms, mut ratio, mut four_s) = (vec![], vec![], vec![], vec![]);
    for _ in 0..samples {
        let (fresh, child) = rt.block_on(opens(dir.path()))?;
        ratio.push(child / fresh);
        fresh_ms.push(fresh / OPENS as f64);
        child_ms.push(child / OPENS as f64);
        four_s.push(rt.block_on(four_children(dir.path()))?);
    }
    rows.push(Row::stats(
        "open a fresh in-process session (actor, status, name)",
        &fresh_ms,
        "ms",
        3,
    ));
    rows.push(Row::stats(
        "open a child session through the spawner",
        &child_ms,
        "ms",
        3,
    ));
    rows.push(Row::single(
        "child open / fresh open, median of paired samples (goal ≤ 1.2x)",
        median(&ratio),
        "x",
        3,
    ));
    rows.push(Row::stats(
        "one message with 4 task calls, each child runs `sleep 0.5`: prompt to settle (goal ≤ 0.7 s)",
        &four_s,
        "s",
        3,
    ));
    Ok(())
}

fn provider(turns: serde_json::Value) -> Res<Arc<dyn Provider>> {
    let script: Script =
        serde_json::from_value(json!({ "turns": turns })).map_err(|e| e.to_string())?;
    Ok(Arc::new(
        ScriptedProvider::from_script(script).map_err(|e| e.to_string())?,
    ))
}

fn setup(dir: &Path, provider: Arc<dyn Provider>) -> HostSetup {
    let clock = Clock::new(None, None);
    let config = AgentConfig::new(dir.to_path_buf(), dir.join("tmp"));
    HostSetup {
        config,
        models: Models::new(
            Registry::default(),
            BTreeMap::new(),
            Default::default(),
            provider,
            None,
        ),
        store: Store::in_memory(SessionHeader::new(&clock, dir.display().to_string())),
        clock,
        announce: true,
        session_dir: dir.to_path_buf(),
        prompt_dirs: (dir.join("p1"), dir.join("p2")).into(),
        approval_timeout: Duration::from_secs(60),
        unattended: false,
        warnings: Vec::new(),
        skills: Vec::new(),
        late_warnings: None,
        open_spec: Default::default(),
        on_saved_rules: None,
        worktree: None,
        subagents: Some(SubagentSetup {
            agents: Arc::new(AgentDef::built_ins()),
            max_depth: 1,
            depth: 0,
            registry: None,
            parent_id: None,
            relay: None,
        }),
    }
}

/// Milliseconds for [`OPENS`] fresh opens, then for [`OPENS`] child opens.
async fn opens(dir: &Path) -> Res<(f64, f64)> {
    let p = provider(json!([]))?;
    let start = Instant::now();
    for _ in 0..OPENS {
        let mut s = setup(dir, p.clone());
        s.subagents = None;
        let h = actor::spawn(s, "bench".into(), (1024, 1 << 20));
        h.status().await.ok_or("the session ended")?;
        let (named, _) = h
            .request(Request::new("set_session_name", json!({"name": "task: x"})))
            .await;
        named.map_err(|e| e.message)?;
        // Dropped, as a child is below: the actor ends once its handles are gone.
        drop(h);
    }
    let fresh = start.elapsed().as_secs_f64() * 1e3;
    // No parent host reads what the children tell it (their dialogs): its end is dropped.
    let (parent, _) = tokio::sync::mpsc::unbounded_channel();
    let top = subagents(&setup(dir, p.clone()), parent).ok_or("no subagents")?;
    let general = top.agents[0].clone();
    let start = Instant::now();
    for _ in 0..OPENS {
        let child = top
            .spawner
            .open(ChildRequest {
                call_id: "t1".into(),
                description: "x".into(),
                agent: general.clone(),
                parent: ParentRef::default(),
                provider: p.clone(),
                thinking_level: "off".into(),
                depth: 1,
                budget: None,
            })
            .await
            .map_err(|e| e.message)?;
        drop(child);
    }
    Ok((fresh, start.elapsed().as_secs_f64() * 1e3))
}

/// Seconds from the prompt to `agent_settled` of a run whose message starts four children.
async fn four_children(dir: &Path) -> Res<f64> {
    let calls: Vec<_> = (0..4)
        .map(|i| json!({"toolCall": {"id": format!("t{i}"), "name": "task", "arguments": {"description": "w", "prompt": format!("CHILD {i}")}}}))
        .collect();
    // Each child's first call takes a bash turn, its second an answer (all four first calls
    // come before any second one: the commands take 0.5 s).
    let mut turns = vec![json!({"match": "^go", "chunks": calls})];
    for _ in 0..4 {
        turns.push(json!({"match": "^CHILD", "chunks": [{"toolCall": {"name": "bash", "arguments": {"command": "sleep 0.5"}}}]}));
    }
    for _ in 0..4 {
        turns.push(json!({"match": "^CHILD", "chunks": [{"text": "slept"}]}));
    }
    turns.push(json!({"match": "^go", "chunks": [{"text": "done"}]}));
    let p = provider(json!(turns))?;
    let h = actor::spawn(setup(dir, p), "bench".into(), (1024, 1 << 20));
    let (queue, mut rx) = tokio::sync::mpsc::channel::<Delivery>(65536);
    let (reply, attached) = tokio::sync::oneshot::channel();
    h.send(Call::Attach {
        client: 1,
        interactive: false,
        cursor: Some(Cursor {
            epoch: "bench".into(),
            seq: 0,
        }),
        queue,
        reply,
    });
    attached.await.map_err(|_| "attach failed")?;
    let start = Instant::now();
    let (ok, _) = h
        .request(Request::new("prompt", json!({"message": "go"})))
        .await;
    ok.map_err(|e| e.message)?;
    let mut errors = 0;
    while let Some(d) = rx.recv().await {
        let Item::Event(e) = d.item else { continue };
        if e.line.contains(r#""type":"tool_execution_end""#) && e.line.contains(r#""isError":true"#)
        {
            errors += 1;
        }
        if e.line.contains(r#""type":"agent_settled""#) {
            break;
        }
    }
    let took = start.elapsed().as_secs_f64();
    h.stop(Duration::from_secs(1)).await;
    if errors > 0 {
        return Err(format!("{errors} task calls failed"));
    }
    Ok(took)
}
