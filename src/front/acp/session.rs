//! One ACP session's task: it owns the session's [`Link`], turns its public events into
//! `session/update` notifications, answers `session/prompt` when the run settles, turns
//! approval dialogs into `session/request_permission` and the client's answers back into
//! `extension_ui_response`, and cancels and closes. It sends the host only pi commands.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::config::{Config, Policy};
use super::content::Prompt;
use super::fs::EditorFiles;
use super::permissions::{self, Decision, Rules};
use super::schema::{
    ConfigOptionUpdate, ContentBlock, ContentChunk, CurrentModeUpdate, PromptResponse,
    RequestPermissionRequest, SessionConfigOptionValue, SessionNotification, SessionUpdate,
    StopReason, TextContent,
};
use super::updates::Mapper;
use super::{Peer, Sink, STOP_GRACE};
use crate::client::link::{Commands, Link, LinkError, Note};
use crate::kernel::message::Content;
use crate::wire::events::{
    event_of, ErrorKind, Outcome, SettledError, TypedEvent, UiMethod, WireEvent,
};
use crate::wire::jsonrpc::{self as j, ErrorObject, Id};
use crate::wire::pi::data::{MessagesData, State};
use crate::wire::pi::Command;

/// The largest file whose text a `write`'s diff shows as it was before.
pub const MAX_DIFF_BYTES: u64 = 1024 * 1024;

/// What the serve loop asks of a session.
pub enum ToSession {
    Prompt {
        id: Id,
        prompt: Prompt,
    },
    /// `session/cancel` (`request: None`) or `$/cancel_request` for request `request` (which
    /// is then answered -32800, if it is this session's prompt).
    Cancel {
        request: Option<Id>,
    },
    /// `session/load` (`replay`) or `session/resume` of a session live here: answer `id` with
    /// the session's modes and options, after replaying it for a load.
    Reopen {
        id: Id,
        replay: bool,
    },
    /// `session/set_mode`.
    SetMode {
        id: Id,
        mode: String,
    },
    /// `session/set_config_option`.
    SetOption {
        id: Id,
        option: String,
        value: SessionConfigOptionValue,
    },
    /// A pi command answered with its `data` as the request's result (keel's extension
    /// methods: `_keel/jobs/*`).
    Command {
        id: Id,
        command: Command,
    },
    /// `session/close` (answer `id`), or the end of input (`None`): stop and save.
    Close {
        id: Option<Id>,
    },
}

/// What a session's helper tasks report back.
enum Back {
    PromptFailed {
        id: Id,
        error: String,
    },
    Permission {
        call: String,
        tool: String,
        answer: Option<Value>,
    },
}

/// The prompt being served.
struct Turn {
    id: Id,
    /// `session/cancel` came (answer `cancelled`), or `$/cancel_request` (answer -32800).
    cancelled: Option<bool>,
}

struct Task {
    session: String,
    cwd: std::path::PathBuf,
    commands: Commands,
    sink: Sink,
    peer: Arc<Peer>,
    mapper: Mapper,
    rules: Rules,
    turn: Option<Turn>,
    /// Approval dialogs waiting for the client, by tool call id.
    open: HashSet<String>,
    /// The permission request sent for each open call.
    asked: HashMap<String, Id>,
    back: mpsc::UnboundedSender<Back>,
    config: Config,
    /// The editor's files, whose requests wait for their call's `tool_call` (in this process).
    editor: Option<Arc<EditorFiles>>,
}

/// Starts the task of a session just opened; `mapper` has already replayed or skipped what
/// the session held.
pub fn spawn(
    link: Link,
    mapper: Mapper,
    config: Config,
    cwd: std::path::PathBuf,
    sink: Sink,
    peer: Arc<Peer>,
    editor: Option<Arc<EditorFiles>>,
) -> (
    mpsc::UnboundedSender<ToSession>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (back, back_rx) = mpsc::unbounded_channel();
    let task = Task {
        session: link.session_id().to_string(),
        cwd,
        commands: link.commands(),
        sink,
        peer,
        mapper,
        rules: Rules::default(),
        turn: None,
        open: HashSet::new(),
        asked: HashMap::new(),
        back,
        config,
        editor,
    };
    let handle = tokio::spawn(task.run(link, rx, back_rx));
    (tx, handle)
}

impl Drop for Task {
    /// No more `tool_call`s will be sent: the editor's requests stop waiting for them.
    fn drop(&mut self) {
        if let Some(editor) = &self.editor {
            editor.closed();
        }
    }
}

impl Task {
    async fn run(
        mut self,
        mut link: Link,
        mut rx: mpsc::UnboundedReceiver<ToSession>,
        mut back_rx: mpsc::UnboundedReceiver<Back>,
    ) {
        loop {
            tokio::select! {
                note = link.next() => match note {
                    Some(Note::Event { line, typed, .. }) => self.on_line(&line, typed.as_ref()),
                    Some(other) => tracing::debug!("session {}: {other:?}", self.session),
                    None => break,
                },
                Some(back) = back_rx.recv() => self.on_back(back),
                msg = rx.recv() => match msg {
                    Some(ToSession::Close { id }) => {
                        self.close(&mut link).await;
                        if let Some(id) = id {
                            self.sink.result(&id, &json!({}));
                        }
                        return;
                    }
                    Some(msg) => self.on_message(msg).await,
                    None => {
                        self.close(&mut link).await;
                        return;
                    }
                },
            }
        }
        if let Some(turn) = self.turn.take() {
            let e = ErrorObject::new(j::INTERNAL_ERROR, "the session ended during the turn");
            self.sink.error(Some(&turn.id), &e);
        }
    }

    fn update(&self, update: SessionUpdate) {
        self.sink.notify(
            "session/update",
            &SessionNotification::new(self.session.clone(), update),
        );
    }

    fn on_line(&mut self, line: &str, typed: Option<&TypedEvent>) {
        let Some(event) = event_of(line, typed) else {
            return;
        };
        let cwd = self.cwd.clone();
        let before = move |p: &Path| read_small(&cwd.join(p));
        for u in self.mapper.event(&event, &before) {
            let shown = match &u {
                SessionUpdate::ToolCall(c) => Some(c.tool_call_id.to_string()),
                _ => None,
            };
            self.update(u);
            if let (Some(call), Some(editor)) = (shown, &self.editor) {
                editor.shown(&call);
            }
        }
        if let (WireEvent::ToolExecutionEnd { tool_call_id, .. }, Some(editor)) =
            (&event, &self.editor)
        {
            editor.ended(tool_call_id);
        }
        match event {
            WireEvent::ExtensionUiRequest(r) if r.method == UiMethod::Confirm => {
                let tool = r.tool_name.unwrap_or_default().into_owned();
                let args = r.args.map_or(Value::Null, |a| a.into_owned());
                self.on_approval(r.id.into_owned(), tool, args);
            }
            // An approved plan left plan mode (or another client changed the mode); a change
            // this client asked for is already known.
            WireEvent::PermissionModeChanged { mode } => {
                let known = self.config.policy;
                if let (Some(now), Some(policy)) = (known, Policy::parse(&mode)) {
                    if now == policy {
                        return;
                    }
                    self.config.policy = Some(policy);
                    self.update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                        policy.id(),
                    )));
                    self.update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                        self.config.options(),
                    )));
                }
            }
            // The call runs, or ended: its question was answered elsewhere (another client
            // of the daemon), so the editor's is withdrawn.
            WireEvent::ToolExecutionUpdate { tool_call_id, .. }
            | WireEvent::ToolExecutionEnd { tool_call_id, .. }
                if self.open.remove(&*tool_call_id) =>
            {
                if let Some(id) = self.asked.remove(&*tool_call_id) {
                    self.peer.withdraw(&id);
                }
            }
            // A subagent's question shown here was answered in its own session (or the
            // subagent ended): the editor's is withdrawn.
            WireEvent::DialogResolved { id } if self.open.remove(&*id) => {
                if let Some(request) = self.asked.remove(&*id) {
                    self.peer.withdraw(&request);
                }
            }
            // A run settled (the editor's prompt, or another client's in the daemon): the
            // context and cost it leaves go out as `usage_update`, then the prompt's answer.
            WireEvent::AgentSettled { outcome, error, .. } => {
                let answer = self.turn.take().map(|turn| {
                    let reason = stop_reason(&outcome, error.as_ref(), turn.cancelled);
                    (turn.id, reason)
                });
                let (commands, sink) = (self.commands.clone(), self.sink.clone());
                let session = self.session.clone();
                tokio::spawn(async move {
                    let stats = commands.send(&Command::GetSessionStats {}).await;
                    if let Some(update) = stats.ok().as_ref().and_then(super::updates::usage) {
                        sink.notify("session/update", &SessionNotification::new(session, update));
                    }
                    match answer {
                        Some((id, Ok(reason))) => sink.result(&id, &PromptResponse::new(reason)),
                        Some((id, Err(e))) => sink.error(Some(&id), &e),
                        None => {}
                    }
                });
            }
            _ => {}
        }
    }

    fn on_approval(&mut self, call: String, tool: String, args: Value) {
        if self.turn.as_ref().is_some_and(|t| t.cancelled.is_some()) {
            self.decide(&call, Decision::Cancelled);
            return;
        }
        // The session's own mode (set through `set_permission_mode`) decided that this call
        // asks: a mode's answer here would bypass an `ask` rule.
        if let Some(decision) = self.rules.standing(&tool) {
            self.decide(&call, decision);
            return;
        }
        let request = RequestPermissionRequest::new(
            self.session.clone(),
            self.mapper.permission_call(&call, &tool, &args),
            permissions::options(&tool),
        );
        let Some((request_id, rx)) = self.peer.begin("session/request_permission", &request) else {
            return self.decide(&call, Decision::Cancelled);
        };
        self.open.insert(call.clone());
        self.asked.insert(call.clone(), request_id);
        let back = self.back.clone();
        tokio::spawn(async move {
            let answer = rx.await.ok().and_then(Result::ok);
            let _ = back.send(Back::Permission { call, tool, answer });
        });
    }

    /// Answers the host's dialog for `call`.
    fn decide(&self, call: &str, decision: Decision) {
        let allowed = matches!(
            decision,
            Decision::Allow | Decision::AllowAlways | Decision::AllowAcceptEdits
        );
        if allowed && self.mapper.knows(call) {
            self.update(self.mapper.started(call));
        }
        let commands = self.commands.clone();
        let answer = decision.response(call);
        tokio::spawn(async move {
            let _ = commands.send(&answer).await;
        });
    }

    fn on_back(&mut self, back: Back) {
        match back {
            Back::PromptFailed { id, error } => {
                if self.turn.as_ref().is_some_and(|t| t.id == id) {
                    self.turn = None;
                }
                self.sink
                    .error(Some(&id), &ErrorObject::new(j::INTERNAL_ERROR, error));
            }
            Back::Permission { call, tool, answer } => {
                // A dialog already answered as cancelled (session/cancel) stays answered.
                self.asked.remove(&call);
                if self.open.remove(&call) {
                    let decision = self.rules.answer(&tool, answer.as_ref());
                    self.decide(&call, decision);
                }
            }
        }
    }

    async fn on_message(&mut self, msg: ToSession) {
        match msg {
            ToSession::Prompt { id, prompt } => self.prompt(id, prompt),
            ToSession::Cancel { request } => self.cancel(request),
            ToSession::Reopen { id, replay } => {
                if replay {
                    self.replay().await;
                }
                self.sink.result(&id, &opened(&self.config, None));
            }
            ToSession::SetMode { id, mode } => match self.set_policy(&mode).await {
                Ok(()) => {
                    self.sink.result(&id, &json!({}));
                    self.update(SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(
                        self.config.options(),
                    )));
                }
                Err(e) => self.sink.error(Some(&id), &e),
            },
            ToSession::SetOption { id, option, value } => {
                match self.set_option(&option, &value).await {
                    Ok(()) => self
                        .sink
                        .result(&id, &json!({"configOptions": self.config.options()})),
                    Err(e) => self.sink.error(Some(&id), &e),
                }
            }
            ToSession::Command { id, command } => {
                // Answered when the host answers (`kill_job` waits for the job's end), while
                // the session goes on.
                let (commands, sink) = (self.commands.clone(), self.sink.clone());
                tokio::spawn(async move {
                    match commands.send(&command).await {
                        Ok(data) => sink.result(&id, &data),
                        Err(e) => {
                            sink.error(Some(&id), &ErrorObject::new(j::COMMAND_FAILED, e.message))
                        }
                    }
                });
            }
            ToSession::Close { .. } => {}
        }
    }

    fn prompt(&mut self, id: Id, prompt: Prompt) {
        if self.turn.is_some() {
            let e = ErrorObject::new(
                j::INVALID_REQUEST,
                "a prompt is already running in this session; cancel it or wait for its answer",
            );
            self.sink.error(Some(&id), &e);
            return;
        }
        if let Some(ask) = super::rewind::parse(&prompt.message) {
            return self.rewind(id, ask);
        }
        self.turn = Some(Turn {
            id: id.clone(),
            cancelled: None,
        });
        let prompt = Command::Prompt {
            message: prompt.message,
            images: images(prompt.images),
            streaming_behavior: None,
        };
        let (commands, back) = (self.commands.clone(), self.back.clone());
        tokio::spawn(async move {
            if let Err(error) = commands.send(&prompt).await {
                let _ = back.send(Back::PromptFailed {
                    id,
                    error: error.message,
                });
            }
        });
    }

    /// `/rewind`: done by the host; its report is an agent message, then the prompt ends.
    fn rewind(&self, id: Id, ask: Result<super::rewind::Ask, String>) {
        let (commands, sink) = (self.commands.clone(), self.sink.clone());
        let session = self.session.clone();
        tokio::spawn(async move {
            let text = super::rewind::run(&commands, ask).await;
            let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
            let update = SessionUpdate::AgentMessageChunk(chunk);
            sink.notify("session/update", &SessionNotification::new(session, update));
            sink.result(&id, &PromptResponse::new(StopReason::EndTurn));
        });
    }

    fn cancel(&mut self, request: Option<Id>) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        match &request {
            Some(r) if *r != turn.id => return,
            _ => {}
        }
        if turn.cancelled.is_none() {
            turn.cancelled = Some(request.is_some());
        }
        for call in std::mem::take(&mut self.open) {
            self.decide(&call, Decision::Cancelled);
        }
        let commands = self.commands.clone();
        tokio::spawn(async move {
            let _ = commands.send(&Command::Abort {}).await;
        });
    }

    /// `session/load` of this live session: the whole branch again.
    async fn replay(&mut self) {
        let got = self.commands.ask::<MessagesData>(&Command::GetMessages {});
        let messages = match got.await {
            Ok(data) => data.messages,
            Err(e) => {
                tracing::warn!("cannot replay session {}: {e}", self.session);
                Vec::new()
            }
        };
        let mut fresh = Mapper::new(self.cwd.clone(), self.mapper.asks);
        for u in fresh.replay(&messages) {
            self.update(u);
        }
        // The task list the session had (a resumed session has it again).
        if let Ok(state) = self.commands.ask::<State>(&Command::GetState {}).await {
            if !state.todos.is_empty() {
                self.update(super::updates::plan(&state.todos));
            }
        }
    }

    /// Sets the session's permission mode (the host's, so that its rules keep applying).
    async fn set_policy(&mut self, mode: &str) -> Result<(), ErrorObject> {
        let bad =
            |why: String| ErrorObject::new(j::INVALID_PARAMS, format!("Invalid params: {why}"));
        if self.config.policy.is_none() {
            return Err(bad(format!(
                "`modeId`: this session's policy is fixed by --permission; {mode} cannot be chosen"
            )));
        }
        let policy = Policy::parse(mode).ok_or_else(|| {
            bad(format!(
                "`modeId`: unknown mode {mode} (ask, auto, read-only, accept-edits or plan)"
            ))
        })?;
        let set = Command::SetPermissionMode {
            mode: policy.id().to_string(),
        };
        if let Err(e) = self.commands.send(&set).await {
            return Err(ErrorObject::new(j::INTERNAL_ERROR, e.message));
        }
        self.config.policy = Some(policy);
        Ok(())
    }

    async fn set_option(
        &mut self,
        option: &str,
        value: &SessionConfigOptionValue,
    ) -> Result<(), ErrorObject> {
        let bad =
            |why: String| ErrorObject::new(j::INVALID_PARAMS, format!("Invalid params: {why}"));
        let Some(value) = value.as_value_id().map(|v| v.0.to_string()) else {
            return Err(bad(format!(
                "`value`: {option} takes one of its options' values"
            )));
        };
        let failed = |e: LinkError| ErrorObject::new(j::INTERNAL_ERROR, e.message);
        match option {
            "mode" => {
                self.set_policy(&value).await.map_err(|mut e| {
                    e.message = e.message.replace("`modeId`", "`value`");
                    e
                })?;
                if let Some(p) = self.config.policy {
                    self.update(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                        p.id(),
                    )));
                }
            }
            "model" => {
                if !self.config.models.iter().any(|(v, _)| *v == value) {
                    return Err(bad(format!("`value`: unknown model {value}")));
                }
                let (provider, model) = value.split_once('/').unwrap_or(("", &value));
                let set = Command::SetModel {
                    provider: provider.to_string(),
                    model_id: model.to_string(),
                };
                self.commands.send(&set).await.map_err(failed)?;
            }
            "thought_level" => {
                if !self.config.levels.contains(&value) {
                    return Err(bad(format!("`value`: unknown thinking level {value}")));
                }
                let set = Command::SetThinkingLevel { level: value };
                self.commands.send(&set).await.map_err(failed)?;
            }
            other => return Err(bad(format!("`configId`: unknown option {other}"))),
        }
        if let Ok(state) = self.commands.send(&Command::GetState {}).await {
            self.config.read_state(&state);
        }
        Ok(())
    }

    fn answer(&self, turn: Turn, outcome: &Outcome, error: Option<&SettledError>) {
        match stop_reason(outcome, error, turn.cancelled) {
            Ok(reason) => self.sink.result(&turn.id, &PromptResponse::new(reason)),
            Err(e) => self.sink.error(Some(&turn.id), &e),
        }
    }

    /// Stops the session (its run aborted, dialogs cancelled) and saves it, reading its last
    /// events meanwhile so that nothing waits on this task.
    async fn close(&mut self, link: &mut Link) {
        for call in std::mem::take(&mut self.open) {
            self.decide(&call, Decision::Cancelled);
        }
        if let Some(turn) = self.turn.as_mut() {
            turn.cancelled.get_or_insert(false);
        }
        let commands = self.commands.clone();
        let stop = commands.stop(STOP_GRACE);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                note = link.next() => match note {
                    Some(Note::Event { line, typed, .. }) => self.on_line(&line, typed.as_ref()),
                    Some(_) => {}
                    None => {
                        (&mut stop).await;
                        break;
                    }
                },
            }
        }
        while let Some(Note::Event { line, typed, .. }) = link.try_next() {
            self.on_line(&line, typed.as_ref());
        }
        if let Some(turn) = self.turn.take() {
            self.answer(turn, &Outcome::Aborted, None);
        }
    }
}

/// The answer to `session/new` (with `session`), `session/load` and `session/resume`: the
/// session's modes and config options.
pub fn opened(config: &Config, session: Option<&str>) -> Value {
    let mut v = json!({"configOptions": config.options()});
    if let Some(modes) = config.modes() {
        v["modes"] = serde_json::to_value(modes).unwrap_or(Value::Null);
    }
    if let Some(s) = session {
        v["sessionId"] = json!(s);
    }
    v
}

/// The prompt's answer from the run's verdict (`agent_settled`): `cancelled` (by request:
/// `Some(true)` → -32800) wins; a failed run that is not a stop reason of ACP is an error.
pub fn stop_reason(
    outcome: &Outcome,
    error: Option<&SettledError>,
    cancelled: Option<bool>,
) -> Result<StopReason, ErrorObject> {
    match cancelled {
        Some(true) => {
            return Err(ErrorObject::new(
                j::REQUEST_CANCELLED,
                "Request cancelled: the turn was aborted",
            ))
        }
        Some(false) => return Ok(StopReason::Cancelled),
        None => {}
    }
    let kind = error.map(|e| &e.kind);
    match (outcome, kind) {
        (Outcome::Completed, _) => Ok(StopReason::EndTurn),
        (Outcome::Aborted, _) => Ok(StopReason::Cancelled),
        (Outcome::TurnLimit, _) => Ok(StopReason::MaxTurnRequests),
        (Outcome::Failed, Some(ErrorKind::Length)) => Ok(StopReason::MaxTokens),
        (Outcome::Failed, Some(ErrorKind::Refusal)) => Ok(StopReason::Refusal),
        _ => {
            let message = error.map_or_else(
                || format!("the turn ended as {outcome}"),
                |e| e.message.clone(),
            );
            let mut e = ErrorObject::new(j::INTERNAL_ERROR, message);
            e.data = Some(json!({"outcome": outcome, "kind": kind}));
            Err(e)
        }
    }
}

/// A file's text if it is at most [`MAX_DIFF_BYTES`] of UTF-8.
fn read_small(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_DIFF_BYTES {
        return None;
    }
    String::from_utf8(std::fs::read(path).ok()?).ok()
}

/// A prompt's image blocks (built by `content`) as the command's images.
fn images(blocks: Vec<Value>) -> Vec<Content> {
    let image = |b| serde_json::from_value::<Content>(b).ok();
    blocks.into_iter().filter_map(image).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: &str) -> SettledError {
        SettledError {
            kind: kind.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn verdicts_map_to_stop_reasons() {
        assert_eq!(
            stop_reason(&Outcome::Completed, None, None),
            Ok(StopReason::EndTurn)
        );
        assert_eq!(
            stop_reason(&Outcome::Aborted, None, None),
            Ok(StopReason::Cancelled)
        );
        assert_eq!(
            stop_reason(&Outcome::TurnLimit, None, None),
            Ok(StopReason::MaxTurnRequests)
        );
        assert_eq!(
            stop_reason(&Outcome::Failed, Some(&err("length")), None),
            Ok(StopReason::MaxTokens)
        );
        assert_eq!(
            stop_reason(&Outcome::Failed, Some(&err("refusal")), None),
            Ok(StopReason::Refusal)
        );
        assert_eq!(
            stop_reason(&Outcome::Completed, None, Some(false)),
            Ok(StopReason::Cancelled)
        );
        assert_eq!(
            stop_reason(&Outcome::Aborted, None, Some(true))
                .unwrap_err()
                .code,
            j::REQUEST_CANCELLED
        );
        let e = stop_reason(&Outcome::Failed, Some(&err("provider_http")), None).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (j::INTERNAL_ERROR, "m"));
    }
}
