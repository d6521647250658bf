//! The subagent seam (`DESIGN.md` §17): the `task` tool's schema and what the kernel asks of
//! whoever runs a child agent. The kernel knows agent definitions as data and a [`Spawner`]
//! as a trait; the host implements it (a child is a session of the same host). The kernel
//! fires `SubagentStart`/`SubagentStop`, publishes the child's steps as `ToolCallUpdated` of
//! the parent's call, and turns the child's end into the call's result. Nothing here starts a
//! session, reads a file or knows a front end.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::kernel::abort::AbortSignal;
use crate::kernel::message::Usage;
use crate::kernel::provider::Provider;

/// The tool's name.
pub const TASK: &str = "task";

/// The read-only tools of the built-in `explore` agent.
pub const EXPLORE_TOOLS: &[&str] = &["read", "grep", "find", "ls"];

/// A boxed future (the seam is a trait object).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where an agent definition comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "path")]
pub enum Origin {
    /// `general` and `explore`.
    BuiltIn,
    /// `$KEEL_HOME/agents/*.md`, or Claude Code's `~/.claude/agents/*.md`
    /// (`$CLAUDE_CONFIG_DIR/agents/*.md`).
    User(PathBuf),
    /// `<project>/.keel/agents/*.md` or `<project>/.claude/agents/*.md` (loaded only in a
    /// trusted project).
    Project(PathBuf),
}

impl Origin {
    /// `built-in`, `user` or `project`.
    pub fn word(&self) -> &'static str {
        match self {
            Origin::BuiltIn => "built-in",
            Origin::User(_) => "user",
            Origin::Project(_) => "project",
        }
    }

    /// The definition's file (`None` for a built-in).
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Origin::BuiltIn => None,
            Origin::User(p) | Origin::Project(p) => Some(p),
        }
    }

    /// Where it came from, for people: `built-in`, `user (/home/u/.claude/agents/x.md)`, or
    /// `project (.claude/agents/x.md)` (a project's file relative to the project, which is
    /// the directory above its `.keel` or `.claude`).
    pub fn label(&self) -> String {
        match self {
            Origin::BuiltIn => "built-in".to_string(),
            Origin::User(p) => format!("user ({})", p.display()),
            Origin::Project(p) => {
                let root = p.parent().and_then(|d| d.parent()).and_then(|d| d.parent());
                let shown = root.and_then(|r| p.strip_prefix(r).ok()).unwrap_or(p);
                format!("project ({})", shown.display())
            }
        }
    }
}

/// One kind of subagent the `task` tool can start (`subagent_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDef {
    /// What `subagent_type` names and hooks see as `agent_type`.
    pub name: String,
    /// When to use it: shown to the model in the tool's description.
    pub description: String,
    /// keel tool names; `None`: every built-in tool (never `task` unless nesting allows it).
    pub tools: Option<Vec<String>>,
    /// `provider/id` or a bare id of the parent's provider; `None`: the parent's model.
    pub model: Option<String>,
    /// The child's system prompt (the definition's body); empty: keel's default.
    pub system_prompt: String,
    pub origin: Origin,
    /// Claude's `isolation` (`worktree`): not supported yet, the child runs in the session's
    /// directory; shown by `keel agents list`.
    pub isolation: Option<String>,
}

impl AgentDef {
    /// The built-in definitions: `general` (every tool) and `explore` (read-only).
    pub fn built_ins() -> Vec<AgentDef> {
        vec![
            AgentDef {
                name: "general".into(),
                description: "General-purpose agent for multi-step tasks: searches, reads, \
                              edits and runs commands, then reports what it did."
                    .into(),
                tools: None,
                model: None,
                system_prompt: String::new(),
                origin: Origin::BuiltIn,
                isolation: None,
            },
            AgentDef {
                name: "explore".into(),
                description: "Read-only explorer: finds and reads files to answer a question \
                              about the code; cannot change anything."
                    .into(),
                tools: Some(EXPLORE_TOOLS.iter().map(|s| s.to_string()).collect()),
                model: None,
                system_prompt: String::new(),
                origin: Origin::BuiltIn,
                isolation: None,
            },
        ]
    }
}

/// The parent as a child must know it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParentRef {
    pub session_id: String,
    /// The parent's session file (`parentSession` of the child's header); empty without one.
    pub file: String,
}

/// What the kernel hands the spawner for one `task` call.
#[derive(Clone)]
pub struct ChildRequest {
    /// The parent's `task` call that starts the child (its dialogs shown to the parent's
    /// clients name it).
    pub call_id: String,
    pub description: String,
    pub agent: AgentDef,
    pub parent: ParentRef,
    /// The parent's model now (used unless the definition names one).
    pub provider: Arc<dyn Provider>,
    pub thinking_level: String,
    /// This child's nesting depth (1 for a child of the top session).
    pub depth: u32,
    /// The cost account of the parent's run (`None`: uncapped): the child's runs spend from
    /// it and stop once it is exceeded, as the parent's does.
    pub budget: Option<crate::kernel::budget::Budget>,
}

/// One step of a running child, as the parent's stream shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildStep {
    /// The tool the child runs.
    pub tool_name: String,
    pub args: Value,
}

/// The `details` of a `task` call's `tool_execution_update` and of its result (read back by
/// the TUI, which draws a running child from them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentDetails {
    pub session_id: String,
    pub agent_type: String,
    pub description: String,
    /// The step the child is at (an update), absent in the result.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub step: Option<ChildStep>,
    /// Tool calls the child made so far.
    #[serde(default)]
    pub tool_count: u32,
    /// In the result: the child's usage (its own subagents' included) and duration.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub duration_ms: Option<u64>,
}

impl SubagentDetails {
    /// The usage a finished tool call of `tool_name` with `details` adds to its session's
    /// totals besides the model's own: a `task` result's child usage (`None` for any other
    /// call, and for a `task` call that did not start a child).
    pub fn usage_of(tool_name: &str, details: Option<&Value>) -> Option<Usage> {
        if tool_name != TASK {
            return None;
        }
        let details = SubagentDetails::deserialize(details?).ok()?;
        details.usage
    }
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildOutcome {
    /// The child's last assistant text.
    pub final_text: String,
    /// What the child's model calls cost, its compactions and its own subagents' included.
    pub usage: Usage,
    pub tool_count: u32,
    /// Why the child failed (its run did not complete), if it did.
    pub failure: Option<String>,
}

/// Why a child could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    pub kind: TaskErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskErrorKind {
    /// The definition's model cannot be used.
    Model,
    /// The child session could not be opened or ended before settling.
    Session,
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TaskError {}

/// A child opened: run to its end, perhaps run again (a `SubagentStop` hook that blocks gives
/// it the hook's reason to go on with), then closed.
pub trait Child: Send {
    fn session_id(&self) -> String;
    fn transcript_path(&self) -> String;
    /// Runs `prompt` to its end; each tool call the child starts goes to `steps`. `abort`
    /// aborts the child (and the call answers once it settled). A second call continues the
    /// same conversation; its outcome counts that run only.
    fn run(
        &mut self,
        prompt: String,
        steps: mpsc::UnboundedSender<ChildStep>,
        abort: AbortSignal,
    ) -> BoxFuture<'_, Result<ChildOutcome, TaskError>>;
    /// Ends the child's session (saved; in the daemon it leaves the list of live sessions).
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// Opens child sessions (the host implements it).
pub trait Spawner: Send + Sync {
    fn open(&self, request: ChildRequest) -> BoxFuture<'_, Result<Box<dyn Child>, TaskError>>;
}

/// A session's subagents: who opens them and which kinds there are. Present only while the
/// session may start one (its depth is under the limit): then it has the `task` tool.
#[derive(Clone)]
pub struct Subagents {
    pub spawner: Arc<dyn Spawner>,
    pub agents: Arc<Vec<AgentDef>>,
    /// This session's depth (0: the top session).
    pub depth: u32,
    pub parent: ParentRef,
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagents")
            .field("agents", &self.agents)
            .field("depth", &self.depth)
            .field("parent", &self.parent)
            .finish()
    }
}

impl Subagents {
    /// The same subagents for the session `session_id` saved at `file`.
    pub fn for_session(&self, session_id: &str, file: &str) -> Subagents {
        Subagents {
            parent: ParentRef {
                session_id: session_id.to_string(),
                file: file.to_string(),
            },
            ..self.clone()
        }
    }

    /// The `task` tool as the model sees it: see [`task_spec`].
    pub fn spec(&self) -> crate::kernel::tool::ToolSpec {
        task_spec(&self.agents)
    }

    /// The definition `subagent_type` names (`None`/empty: `general`; Claude's names
    /// `general-purpose` and `Explore` are accepted).
    pub fn find(&self, kind: Option<&str>) -> Result<&AgentDef, String> {
        let want = match kind.map(str::trim) {
            None | Some("") | Some("general-purpose") => "general",
            Some("Explore") => "explore",
            Some(k) => k,
        };
        self.agents.iter().find(|a| a.name == want).ok_or_else(|| {
            let names: Vec<&str> = self.agents.iter().map(|a| a.name.as_str()).collect();
            format!(
                "unknown subagent_type `{want}`; available: {}",
                names.join(", ")
            )
        })
    }
}

/// The `task` tool as the model sees it with `agents` to start: Claude's `Task` input, the
/// types listed.
pub fn task_spec(agents: &[AgentDef]) -> crate::kernel::tool::ToolSpec {
    let mut description = String::from(
        "Start a subagent: a separate agent with its own context that works on one task and \
         returns only its final answer. Give it everything it needs in `prompt` (it does not \
         see this conversation). Several task calls in one message run in parallel.\n\
         Available subagent types (`subagent_type`):",
    );
    for a in agents.iter() {
        description.push_str(&format!("\n- {}: {}", a.name, a.description));
    }
    let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    crate::kernel::tool::ToolSpec {
        name: TASK.into(),
        description: description.into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "A short (3-5 word) label of the task"},
                "prompt": {"type": "string", "description": "The whole task for the subagent"},
                "subagent_type": {"type": "string", "enum": names, "description": "The kind of subagent (default general)"}
            },
            "required": ["description", "prompt"]
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never;
    impl Spawner for Never {
        fn open(&self, _: ChildRequest) -> BoxFuture<'_, Result<Box<dyn Child>, TaskError>> {
            Box::pin(async {
                Err(TaskError {
                    kind: TaskErrorKind::Session,
                    message: "no".into(),
                })
            })
        }
    }

    #[test]
    fn a_task_result_carries_its_child_s_usage() {
        let mut usage = Usage {
            input: 7,
            ..Default::default()
        };
        usage.cost.total = 0.5;
        let details = SubagentDetails {
            session_id: "c".into(),
            agent_type: "general".into(),
            description: "d".into(),
            step: None,
            tool_count: 1,
            usage: Some(usage.clone()),
            duration_ms: Some(3),
        };
        let v = json!(details);
        assert_eq!(SubagentDetails::usage_of(TASK, Some(&v)), Some(usage));
        assert_eq!(SubagentDetails::usage_of("bash", Some(&v)), None);
        assert_eq!(SubagentDetails::usage_of(TASK, None), None);
        assert_eq!(
            SubagentDetails::usage_of(TASK, Some(&json!({"x": 1}))),
            None
        );
    }

    #[test]
    fn the_spec_lists_every_type_and_find_takes_claudes_names() {
        let s = Subagents {
            spawner: Arc::new(Never),
            agents: Arc::new(AgentDef::built_ins()),
            depth: 0,
            parent: ParentRef::default(),
        };
        let spec = s.spec();
        assert!(spec.description.contains("\n- general: General-purpose"));
        assert!(spec.description.contains("\n- explore: Read-only"));
        assert_eq!(
            spec.parameters["properties"]["subagent_type"]["enum"],
            json!(["general", "explore"])
        );
        assert_eq!(s.find(None).map(|a| a.name.as_str()), Ok("general"));
        assert_eq!(
            s.find(Some("Explore")).map(|a| a.name.as_str()),
            Ok("explore")
        );
        assert_eq!(
            s.find(Some("nope")).err().as_deref(),
            Some("unknown subagent_type `nope`; available: general, explore")
        );
    }
}
