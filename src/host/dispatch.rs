//! Requests to host actions: the command table (an exhaustive match on [`Command`]), prompt
//! acceptance and queueing, model and thinking-level changes, and approval answers.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde::Serialize;
use serde_json::Value;

use super::{Answer, CommandError, CommandErrorKind, Deferred, Host, BUSY};
use crate::kernel::event::ApprovalDecision;
use crate::kernel::message::Content;
use crate::kernel::op::QueueMode;
use crate::wire::pi::data::{
    ClearQueueData, CycleModelData, Disposition, LevelData, LevelsData, MessagesData, ModelsData,
    PromptData, TextData,
};
use crate::wire::pi::{Command, CommandName, DeliveryMode, StreamingBehavior};
use crate::wire::rpc::{ParamError, Request};

/// A response's `data` from its typed payload.
pub(super) fn data<T: Serialize>(payload: &T) -> Option<Value> {
    Some(serde_json::to_value(payload).unwrap_or(Value::Null))
}

/// Runs a command that answers without data.
macro_rules! done {
    ($action:expr) => {{
        $action;
        Ok(None)
    }};
}

/// A prompt's answer once it was queued.
fn queued() -> Answer {
    Ok(data(&PromptData {
        disposition: Disposition::Queued,
    }))
}

impl Host {
    pub(super) async fn dispatch(&mut self, req: Request) {
        // Everything published so far is written and recorded before this request is served.
        self.drain_events();
        let Some(name) = CommandName::parse(&req.command) else {
            let unknown = CommandError::unknown_command(&req.command);
            return self.respond(&req, Err(unknown));
        };
        if name.changes_session() {
            if let Err(e) = self.writable() {
                return self.respond(&req, Err(e));
            }
        }
        let decoded = name.decode(&req);
        if name.replaces_session() {
            return self.session_command(req, decoded).await;
        }
        match decoded {
            Ok(command) => self.serve(req, command).await,
            Err(e) => self.respond(&req, Err(e.into())),
        }
    }

    /// `new_session`, `switch_session`, `fork`, `clone`: while a run is active, pi aborts it
    /// first and the change (or its field error) is answered once it has settled.
    async fn session_command(&mut self, req: Request, decoded: Result<Command, ParamError>) {
        if self.busy() {
            self.live.session.abort();
            self.deferred.push(Deferred::Session(req, decoded));
            return;
        }
        let answer = self.change_session(decoded).await;
        self.respond(&req, answer);
    }

    /// Serves a decoded command; commands that answer later queue their reply themselves.
    async fn serve(&mut self, req: Request, command: Command) {
        let answer = match command {
            Command::Prompt {
                message,
                images,
                streaming_behavior: how,
            } => self.prompt(&message, images, how).await,
            Command::Steer { message, images } => self.queue(true, &message, images).await,
            Command::FollowUp { message, images } => self.queue(false, &message, images).await,
            Command::Abort {} if self.busy() => {
                self.live.session.abort();
                return self.deferred.push(Deferred::Respond(req));
            }
            Command::Abort {} => Ok(None),
            Command::ClearQueue {} => Ok(data(&clear_queue(self.live.session.clear_queue()))),
            c @ (Command::NewSession { .. }
            | Command::SwitchSession { .. }
            | Command::Fork { .. }
            | Command::Clone {}) => self.change_session(Ok(c)).await,
            Command::GetState {} => Ok(data(&self.state())),
            Command::GetMessages {} => Ok(data(&MessagesData {
                messages: self.live.session.messages(),
            })),
            Command::SetModel { provider, model_id } => self.set_model(&provider, &model_id).await,
            Command::CycleModel {} => Ok(data(&self.cycle_model().await)),
            Command::GetAvailableModels {} => Ok(data(&ModelsData {
                models: self.models.available().await,
            })),
            Command::SetThinkingLevel { level } => done!(self.set_thinking_level(&level)),
            Command::CycleThinkingLevel {} => Ok(data(&self.cycle_thinking_level())),
            Command::GetAvailableThinkingLevels {} => Ok(data(&LevelsData {
                levels: self.live.session.provider().info().thinking_levels.clone(),
            })),
            Command::SetSteeringMode { mode } => {
                done!(self.live.session.set_steering_mode(queue_mode(mode)))
            }
            Command::SetFollowUpMode { mode } => {
                done!(self.live.session.set_follow_up_mode(queue_mode(mode)))
            }
            Command::Compact {
                custom_instructions,
            } => return self.compact(req, custom_instructions),
            Command::SetAutoCompaction { enabled } => {
                done!(self.live.session.set_auto_compaction(enabled))
            }
            Command::SetAutoRetry { enabled } => done!(self.live.session.set_auto_retry(enabled)),
            Command::AbortRetry {} => done!(self.live.session.abort_retry()),
            Command::Bash {
                command,
                exclude_from_context: exclude,
            } => return self.bash(&req, command, exclude.unwrap_or(false)),
            Command::AbortBash {} => done!(self.abort_bash()),
            Command::GetSessionStats {} => Ok(data(&self.stats())),
            Command::ExportHtml { output_path } => self.export_html(output_path.as_deref()),
            Command::GetForkMessages {} => Ok(data(&self.fork_messages())),
            Command::GetEntries { since } => self.entries(since.as_deref()),
            Command::GetTree {} => return self.reply(&req, Ok(super::Data::Raw(self.tree_json()))),
            Command::GetLastAssistantText {} => Ok(data(&TextData {
                text: self.live.session.last_assistant_text(),
            })),
            Command::SetSessionName { name } => self.set_session_name(&name),
            Command::GetCommands {} => Ok(data(&self.commands())),
            Command::ExtensionUiResponse {
                id,
                confirmed,
                cancelled,
                value,
            } => return self.ui_response(id, (confirmed, cancelled), value.as_deref()),
            Command::GetPermissions {} => Ok(data(&self.permissions())),
            Command::SetPermissionMode { mode } => {
                self.set_permission_mode(&mode).map(|d| data(&d))
            }
            Command::Rewind { entry_id, restore } => {
                self.rewind(&entry_id, restore.unwrap_or_default())
            }
            Command::RewindUndo {} => self.rewind_undo(),
            Command::GetCheckpoints {} => Ok(data(&self.checkpoints())),
            Command::RewindPreview { entry_id } => self.rewind_preview(&entry_id),
            Command::GetJobs {} => self.get_jobs(),
            Command::ReadJob { job_id, since, max } => self.read_job(job_id, since, max),
            Command::KillJob { job_id } => return self.kill_job(&req, job_id),
            Command::WriteJob { job_id, data } => self.write_job(job_id, &data),
            Command::ResizeJob { job_id, cols, rows } => self.resize_job(job_id, cols, rows),
        };
        self.respond(&req, answer);
    }

    /// Runs what waited for the active run (or compaction) to end.
    pub async fn run_deferred(&mut self) {
        if self.deferred.is_empty() || self.busy() {
            return;
        }
        for d in std::mem::take(&mut self.deferred) {
            match d {
                Deferred::Respond(req) => self.respond(&req, Ok(None)),
                Deferred::Session(req, decoded) => {
                    let answer = self.change_session(decoded).await;
                    self.respond(&req, answer);
                }
            }
        }
    }

    pub(super) async fn prompt(
        &mut self,
        message: &str,
        images: Vec<Content>,
        behavior: Option<StreamingBehavior>,
    ) -> Answer {
        let input = self.input(message, images).await?;
        let session = &self.live.session;
        if session.status().running {
            return match behavior {
                Some(StreamingBehavior::Steer) => {
                    session.steer_input(input);
                    queued()
                }
                Some(StreamingBehavior::FollowUp) => {
                    session.follow_up_input(input);
                    queued()
                }
                None => Err(busy(BUSY)),
            };
        }
        match session.prompt_input(input) {
            Ok(_run) => Ok(data(&PromptData {
                disposition: Disposition::Started,
            })),
            Err(_) if session.status().compacting => Err(busy(
                "The session is being compacted; send the prompt when compaction_end arrives",
            )),
            Err(_) => Err(busy(BUSY)),
        }
    }

    /// `steer` (`steering`) or `follow_up`.
    pub(super) async fn queue(
        &mut self,
        steering: bool,
        message: &str,
        images: Vec<Content>,
    ) -> Answer {
        let input = self.input(message, images).await?;
        if steering {
            self.live.session.steer_input(input);
        } else {
            self.live.session.follow_up_input(input);
        }
        queued()
    }

    pub(super) async fn set_model(&mut self, provider: &str, model_id: &str) -> Answer {
        let p = self.models.build(provider, model_id).await;
        let p = p?;
        self.live.session.set_model(p);
        Ok(Some(self.model_json()))
    }

    pub(super) async fn cycle_model(&mut self) -> Option<CycleModelData> {
        let models = self.models.available().await;
        if models.len() < 2 {
            return None;
        }
        let current = self.live.session.provider();
        let at = models
            .iter()
            .position(|m| m.provider == current.name() && m.id == current.model())
            .unwrap_or(0);
        for step in 1..models.len() {
            let next = &models[(at + step) % models.len()];
            if let Ok(p) = self.models.build(&next.provider, &next.id).await {
                self.live.session.set_model(p);
                return Some(CycleModelData {
                    model: self.live.session.provider().info().clone(),
                    thinking_level: self.live.session.thinking_level(),
                    is_scoped: false,
                });
            }
        }
        None
    }

    /// `max` is `xhigh`.
    pub(super) fn set_thinking_level(&mut self, level: &str) {
        let level = if level == "max" { "xhigh" } else { level };
        self.live.session.set_thinking_level(level);
    }

    pub(super) fn cycle_thinking_level(&mut self) -> Option<LevelData> {
        let levels = self.live.session.provider().info().thinking_levels.clone();
        if levels.len() < 2 {
            return None;
        }
        let current = self.live.session.thinking_level();
        let at = levels.iter().position(|l| *l == current).unwrap_or(0);
        let next = &levels[(at + 1) % levels.len()];
        let level = self.live.session.set_thinking_level(next);
        Some(LevelData { level })
    }

    /// A dialog answer: `confirmed:true` allows the call, `value:"always"` (without
    /// `confirmed:false`) allows it and the calls like it (see `always`); `confirmed:true`
    /// with `value:"accept-edits"` approves a plan and leaves plan mode for `accept-edits`;
    /// `cancelled:true` or anything else denies it.
    pub(super) fn ui_response(
        &mut self,
        id: Option<String>,
        (confirmed, cancelled): (Option<bool>, Option<bool>),
        value: Option<&str>,
    ) {
        let Some(id) = id else {
            tracing::warn!("extension_ui_response without a string id");
            return;
        };
        if self.answer_shown(&id, (confirmed, cancelled), value) {
            return;
        }
        if self.open_dialogs.remove(&id).is_some() {
            self.relay_closed(&id);
        }
        let Some(call_id) = self.approvals.answer(&id) else {
            tracing::debug!("extension_ui_response for unknown or closed dialog {id}");
            return;
        };
        let cancelled = cancelled == Some(true);
        let always = value == Some("always") && confirmed != Some(false) && !cancelled;
        if always {
            self.allow_always(&call_id);
        }
        self.asked.remove(&call_id);
        let allow = (confirmed == Some(true) || always) && !cancelled;
        let decision = match (allow, value) {
            // An approved plan, with the user's choice to accept edits from now on.
            (true, Some("accept-edits")) => ApprovalDecision::AllowAcceptEdits,
            (true, _) => ApprovalDecision::Allow,
            (false, _) => ApprovalDecision::Deny,
        };
        self.live.session.approve(&call_id, decision);
    }
}

fn clear_queue((steering, follow_up): (Vec<String>, Vec<String>)) -> ClearQueueData {
    ClearQueueData {
        steering,
        follow_up,
    }
}

fn queue_mode(mode: DeliveryMode) -> QueueMode {
    match mode {
        DeliveryMode::All => QueueMode::All,
        DeliveryMode::OneAtATime => QueueMode::OneAtATime,
    }
}

/// A refusal because a run or a compaction is active.
fn busy(message: &str) -> CommandError {
    CommandError::new(CommandErrorKind::Busy, message)
}
