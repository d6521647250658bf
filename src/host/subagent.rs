//! Subagents as sessions of the same host (`DESIGN.md` §17): the host's [`Spawner`] opens a
//! child as a new session (its own id and file with `parentSession`, named `task: …`) with
//! the parent's settings, rules, sandbox and hooks (those carrying `agent_id`/`agent_type`)
//! and its definition's tools and model, serves it in its own actor (so the daemon can list
//! and attach it like any session), prompts it and follows its stream to its end. Transport
//! neutral: no output, no sockets.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use super::actor::{self, Call, SessionHandle};
use super::models::Models;
use super::relay::{ChildNote, Relay};
use super::stream::{Cursor, Delivery, Item};
use super::{HostSetup, Internal};
use crate::kernel::abort::AbortSignal;
use crate::kernel::agent::AgentConfig;
use crate::kernel::clock::Clock;
use crate::kernel::message::{Message, Usage};
use crate::kernel::provider::Provider;
use crate::kernel::session::{self, SessionHeader, Store};
use crate::kernel::subagent::{
    AgentDef, BoxFuture, Child, ChildOutcome, ChildRequest, ChildStep, Spawner, SubagentDetails,
    Subagents, TaskError, TaskErrorKind,
};
use crate::wire::events::{event_of, Outcome, WireEvent};
use crate::wire::rpc::Request;

/// Where the children a host starts are filed while they run (the daemon: its registry of
/// live sessions, so `keel ps` lists them and `keel attach` reaches them).
pub trait ChildRegistry: Send + Sync {
    fn opened(&self, id: &str, parent: &str, handle: &SessionHandle);
    fn closed(&self, handle: &SessionHandle);
}

/// What a host needs to give its sessions the `task` tool.
#[derive(Clone)]
pub struct SubagentSetup {
    pub agents: Arc<Vec<AgentDef>>,
    /// How deep children may nest (1: the top session's children have no `task` tool).
    pub max_depth: u32,
    /// The depth of the session this setup serves (0: a top session).
    pub depth: u32,
    pub registry: Option<Arc<dyn ChildRegistry>>,
    /// The id of the session whose child this session is (`None` for a top session).
    pub parent_id: Option<String>,
    /// A child's line to its parent's host (`None` for a top session).
    pub relay: Option<Relay>,
}

impl std::fmt::Debug for SubagentSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubagentSetup")
            .field("agents", &self.agents)
            .field("max_depth", &self.max_depth)
            .field("depth", &self.depth)
            .finish()
    }
}

/// The parts of a host's setup its children are started from.
struct Base {
    config: AgentConfig,
    models: tokio::sync::Mutex<Models>,
    clock: Clock,
    session_dir: PathBuf,
    prompt_dirs: crate::prompts::Dirs,
    approval_timeout: Duration,
    unattended: bool,
    setup: SubagentSetup,
    /// The parent's host (its children's dialogs are shown to its clients).
    parent: mpsc::UnboundedSender<Internal>,
}

/// The host's [`Spawner`].
struct HostSpawner(Arc<Base>);

/// The `subagents` of a session served from `setup`: `None` when it has no subagent setup or
/// is nested as deep as allowed.
pub fn subagents(setup: &HostSetup, parent: mpsc::UnboundedSender<Internal>) -> Option<Subagents> {
    let s = setup.subagents.as_ref()?;
    if s.depth >= s.max_depth {
        return None;
    }
    let mut config = setup.config.clone();
    config.subagents = None;
    let base = Base {
        config,
        models: tokio::sync::Mutex::new(setup.models.starting_with(setup.models.start_provider())),
        clock: setup.clock.clone(),
        session_dir: setup.session_dir.clone(),
        prompt_dirs: setup.prompt_dirs.clone(),
        approval_timeout: setup.approval_timeout,
        unattended: setup.unattended,
        setup: s.clone(),
        parent,
    };
    Some(Subagents {
        spawner: Arc::new(HostSpawner(Arc::new(base))),
        agents: s.agents.clone(),
        depth: s.depth,
        parent: Default::default(),
    })
}

/// Claude's model aliases, which a definition ported from Claude may name: the parent's model.
const CLAUDE_ALIASES: &[&str] = &["inherit", "sonnet", "opus", "haiku", "fable"];

impl HostSpawner {
    /// The definition's model, or the parent's.
    async fn provider(&self, req: &ChildRequest) -> Result<Arc<dyn Provider>, TaskError> {
        let Some(model) = req
            .agent
            .model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty() && !CLAUDE_ALIASES.contains(m))
        else {
            return Ok(req.provider.clone());
        };
        let (provider, id) = model
            .split_once('/')
            .unwrap_or((req.provider.name(), model));
        if provider == req.provider.name() && id == req.provider.model() {
            return Ok(req.provider.clone());
        }
        let mut models = self.0.models.lock().await;
        models.build(provider, id).await.map_err(|e| TaskError {
            kind: TaskErrorKind::Model,
            message: format!("agent `{}`: model {model}: {e}", req.agent.name),
        })
    }

    /// The child's settings: the parent's, with the definition's tools and prompt.
    fn config(&self, req: &ChildRequest, id: &str) -> AgentConfig {
        let base = &self.0.config;
        let mut config = base.clone();
        // The child's files are the disk's: an editor's file client (ACP) orders its requests
        // after the `tool_call` updates it was sent, and it is sent none of a child's calls.
        config.files = crate::kernel::tool::files::Files::default();
        if let Some(tools) = &req.agent.tools {
            config.tools = base
                .tools
                .iter()
                .filter(|t| tools.contains(t))
                .cloned()
                .collect();
            config.external_tools.clear();
        }
        let mut prompt = crate::kernel::default_system_prompt(&config.cwd, &config.tools);
        prompt.push_str(
            "\nYou are a subagent: another agent gave you one task. Work on it alone and end \
             with a final answer that reports everything the other agent needs; it sees only \
             that answer.",
        );
        if !req.agent.system_prompt.trim().is_empty() {
            prompt = format!("{}\n\n{prompt}", req.agent.system_prompt.trim());
        }
        config.system_prompt = prompt;
        config.thinking_level = req.thinking_level.clone();
        config.output_schema = None;
        // The child spends from its parent's run: the same cap, not a fresh one.
        config.budget = req.budget.clone();
        config.hooks = base
            .hooks
            .as_ref()
            .map(|h| h.for_agent(id, &req.agent.name));
        config
    }

    async fn open_child(&self, req: ChildRequest) -> Result<Box<dyn Child>, TaskError> {
        let provider = self.provider(&req).await?;
        let b = &self.0;
        let mut header = SessionHeader::new(&b.clock, b.config.cwd.display().to_string());
        let id = header.id.clone();
        let store = match req.parent.file.is_empty() {
            true => Store::in_memory(header),
            false => {
                header.parent_session = Some(req.parent.file.clone());
                let path = b.session_dir.join(session::file_name(&header));
                Store::new_file(path, header)
            }
        };
        let models = b.models.lock().await.starting_with(provider);
        let names = (id.as_str(), req.agent.name.as_str());
        let relay = Relay::new(
            b.parent.clone(),
            (names.0, names.1, &req.description, &req.call_id),
        );
        let setup = HostSetup {
            config: self.config(&req, &id),
            models,
            clock: b.clock.clone(),
            store,
            announce: true,
            session_dir: b.session_dir.clone(),
            prompt_dirs: b.prompt_dirs.clone(),
            approval_timeout: b.approval_timeout,
            unattended: b.unattended,
            warnings: Vec::new(),
            skills: Vec::new(),
            late_warnings: None,
            open_spec: child_spec(&req, &id),
            on_saved_rules: None,
            worktree: None,
            subagents: Some(SubagentSetup {
                depth: req.depth,
                parent_id: Some(req.parent.session_id.clone()),
                relay: Some(relay.clone()),
                ..b.setup.clone()
            }),
        };
        let epoch = format!("child-{id}");
        let handle = actor::spawn(setup, epoch.clone(), (1024, 1 << 20));
        relay.note(ChildNote::Started {
            id: id.clone(),
            handle: handle.clone(),
        });
        let file = handle
            .status()
            .await
            .and_then(|s| s.summary.file)
            .unwrap_or_default();
        let (answer, _) = handle
            .request(Request::new(
                "set_session_name",
                json!({"name": format!("task: {}", req.description)}),
            ))
            .await;
        if let Err(e) = answer {
            handle.stop(Duration::from_secs(1)).await;
            relay.note(ChildNote::Ended { id });
            return Err(TaskError {
                kind: TaskErrorKind::Session,
                message: format!("the child session cannot be saved: {}", e.message),
            });
        }
        if let Some(r) = &b.setup.registry {
            r.opened(&id, &req.parent.session_id, &handle);
        }
        // What `SubagentStop` hooks read: the child's Claude transcript, which its own hooks
        // keep (`agent_transcript_path`).
        let transcript = match &b.config.hooks {
            Some(h) => h.transcript_path_of(&file, &id),
            None => file.clone(),
        };
        Ok(Box::new(HostChild {
            id,
            transcript,
            epoch,
            handle,
            registry: b.setup.registry.clone(),
            relay,
            follower: FOLLOWERS.fetch_add(1, Ordering::Relaxed),
            seen: 0,
        }))
    }
}

impl Spawner for HostSpawner {
    fn open(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn Child>, TaskError>> {
        Box::pin(self.open_child(request))
    }
}

/// A child session served by its own actor.
struct HostChild {
    id: String,
    /// The child's Claude transcript (see `Hooks::transcript_path_of`).
    transcript: String,
    epoch: String,
    handle: SessionHandle,
    registry: Option<Arc<dyn ChildRegistry>>,
    relay: Relay,
    /// The host's subscription to the child's stream, and the last `seq` it read (a second
    /// run is followed from there).
    follower: u64,
    seen: u64,
}

/// Numbers the host's own subscriptions to its children (apart from any client's).
static FOLLOWERS: AtomicU64 = AtomicU64::new(1 << 62);

impl Child for HostChild {
    fn session_id(&self) -> String {
        self.id.clone()
    }

    fn transcript_path(&self) -> String {
        self.transcript.clone()
    }

    fn run(
        &mut self,
        prompt: String,
        steps: mpsc::UnboundedSender<ChildStep>,
        abort: AbortSignal,
    ) -> BoxFuture<'_, Result<ChildOutcome, TaskError>> {
        Box::pin(follow(self, prompt, steps, abort))
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            self.handle.stop(Duration::from_secs(3)).await;
            if let Some(r) = &self.registry {
                r.closed(&self.handle);
            }
            self.relay.note(ChildNote::Ended {
                id: self.id.clone(),
            });
        })
    }
}

fn ended(message: &str) -> TaskError {
    TaskError {
        kind: TaskErrorKind::Session,
        message: message.to_string(),
    }
}

/// Prompts the child and reads its stream until its run settles.
async fn follow(
    child: &mut HostChild,
    prompt: String,
    steps: mpsc::UnboundedSender<ChildStep>,
    abort: AbortSignal,
) -> Result<ChildOutcome, TaskError> {
    let (queue, mut deliveries) = mpsc::channel::<Delivery>(4096);
    let (reply, attached) = oneshot::channel();
    child.handle.send(Call::Attach {
        client: child.follower,
        interactive: false,
        cursor: Some(Cursor {
            epoch: child.epoch.clone(),
            seq: child.seen,
        }),
        queue,
        reply,
    });
    attached
        .await
        .map_err(|_| ended("the child session ended at once"))?;
    let (answer, _) = child
        .handle
        .request(Request::new("prompt", json!({"message": prompt})))
        .await;
    if let Err(e) = answer {
        return Err(ended(&format!(
            "the child refused its prompt: {}",
            e.message
        )));
    }
    let mut out = ChildOutcome {
        final_text: String::new(),
        usage: Usage::default(),
        tool_count: 0,
        failure: None,
    };
    let mut aborting = false;
    loop {
        let delivery = tokio::select! {
            d = deliveries.recv() => d,
            _ = abort.aborted(), if !aborting => {
                aborting = true;
                child.handle.submit(Request::new("abort", json!({})));
                continue;
            }
        };
        let Some(Delivery {
            item: Item::Event(published),
            ..
        }) = delivery
        else {
            match delivery {
                None => return Err(ended("the child session ended before its run settled")),
                Some(_) => continue,
            }
        };
        child.seen = published.seq;
        // In this process: read typed, not parsed back.
        let Some(event) = event_of(&published.line, published.typed.as_ref()) else {
            continue;
        };
        match event {
            WireEvent::ToolExecutionStart {
                tool_name, args, ..
            } => {
                out.tool_count += 1;
                let _ = steps.send(ChildStep {
                    tool_name: tool_name.into_owned(),
                    args: args.into_owned(),
                });
            }
            // The child's own children and its compactions cost too.
            WireEvent::ToolExecutionEnd {
                tool_name, result, ..
            } => {
                let details = result.details.as_deref();
                if let Some(u) = SubagentDetails::usage_of(&tool_name, details) {
                    out.usage.add(&u);
                }
            }
            WireEvent::CompactionEnd {
                result: Some(r), ..
            } => out.usage.add(&r.usage),
            WireEvent::MessageEnd { message } => {
                if let Message::Assistant(a) = message.as_ref() {
                    out.usage.add(&a.usage);
                    let text = a.text();
                    if !text.trim().is_empty() {
                        out.final_text = text;
                    }
                }
            }
            WireEvent::AgentSettled { outcome, error, .. } => {
                if outcome != Outcome::Completed {
                    let why = error.map_or_else(|| outcome.as_str().to_string(), |e| e.message);
                    out.failure = Some(why);
                }
                return Ok(out);
            }
            _ => {}
        }
    }
}

/// What a child session is opened with, as its snapshot and `keel ps` show it: its own id, the
/// agent definition it runs as, and the model and tools that definition asks for (the rest is
/// its parent's).
fn child_spec(req: &ChildRequest, id: &str) -> crate::wire::protocol::spec::SessionSpec {
    use crate::wire::protocol::spec::{SessionPick, SessionSpec};
    SessionSpec {
        session: SessionPick::Id(id.to_string()),
        agent: Some(req.agent.name.clone()),
        model: req.agent.model.clone(),
        tools: req.agent.tools.clone(),
        ..SessionSpec::default()
    }
}
