//! Requests to host actions: the command table, prompt acceptance and queueing, model and
//! thinking-level changes, and approval answers.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use serde_json::{json, Value};

use super::{Answer, CommandError, CommandErrorKind, Deferred, Host, BUSY};
use crate::kernel::event::ApprovalDecision;
use crate::kernel::op::{QueueMode, UserInput};
use crate::kernel::provider::model::THINKING_LEVELS;
use crate::prompts;
use crate::wire::rpc::ParamErrorKind;
use crate::wire::rpc::{self, Request};

/// Every pi command the host serves (`pi-protocol.md` §4.4).
pub const COMMANDS: &[&str] = &[
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "clear_queue",
    "new_session",
    "switch_session",
    "fork",
    "clone",
    "get_state",
    "get_messages",
    "set_model",
    "cycle_model",
    "get_available_models",
    "set_thinking_level",
    "cycle_thinking_level",
    "get_available_thinking_levels",
    "set_steering_mode",
    "set_follow_up_mode",
    "compact",
    "set_auto_compaction",
    "set_auto_retry",
    "abort_retry",
    "bash",
    "abort_bash",
    "get_session_stats",
    "export_html",
    "get_fork_messages",
    "get_entries",
    "get_tree",
    "get_last_assistant_text",
    "set_session_name",
    "get_commands",
    "extension_ui_response",
];

/// Commands that add entries to the session: refused while it cannot be saved.
const CHANGES_SESSION: &[&str] = &[
    "prompt",
    "steer",
    "follow_up",
    "set_model",
    "cycle_model",
    "set_thinking_level",
    "cycle_thinking_level",
    "compact",
    "bash",
    "set_session_name",
];

impl Host {
    pub(super) async fn dispatch(&mut self, req: Request) {
        // Everything published so far is written and recorded before this request is served.
        self.drain_events();
        if CHANGES_SESSION.contains(&req.command.as_str()) {
            if let Err(e) = self.writable() {
                self.respond(&req, Err(e));
                return;
            }
        }
        let answer = match req.command.as_str() {
            "prompt" => self.prompt(&req),
            "steer" | "follow_up" => self.queue(&req),
            "abort" => {
                if self.busy() {
                    self.live.session.abort();
                    self.deferred.push(Deferred::Respond(req));
                    return;
                }
                Ok(None)
            }
            "clear_queue" => {
                let (steering, follow_up) = self.live.session.clear_queue();
                Ok(Some(json!({"steering": steering, "followUp": follow_up})))
            }
            "new_session" | "switch_session" | "fork" | "clone" => {
                if self.busy() {
                    // pi aborts the run first; the change happens once it has settled.
                    self.live.session.abort();
                    self.deferred.push(Deferred::Session(req));
                    return;
                }
                let answer = self.change_session(&req).await;
                self.respond(&req, answer);
                return;
            }
            "get_state" => Ok(Some(self.state())),
            "get_messages" => Ok(Some(json!({"messages": self.live.session.messages()}))),
            "set_model" => self.set_model(&req).await,
            "cycle_model" => Ok(Some(self.cycle_model().await)),
            "get_available_models" => Ok(Some(json!({"models": self.models.available().await}))),
            "set_thinking_level" => self.set_thinking_level(&req),
            "cycle_thinking_level" => Ok(Some(self.cycle_thinking_level())),
            "get_available_thinking_levels" => Ok(Some(
                json!({"levels": self.live.session.provider().info().thinking_levels}),
            )),
            "set_steering_mode" | "set_follow_up_mode" => self.set_queue_mode(&req),
            "compact" => {
                self.compact(req);
                return;
            }
            "set_auto_compaction" => req.bool("enabled").map_err(Into::into).map(|on| {
                self.live.session.set_auto_compaction(on);
                None
            }),
            "set_auto_retry" => req.bool("enabled").map_err(Into::into).map(|on| {
                self.live.session.set_auto_retry(on);
                None
            }),
            "abort_retry" => {
                self.live.session.abort_retry();
                Ok(None)
            }
            "bash" => {
                if let Err(e) = self.bash(&req) {
                    self.respond(&req, Err(e));
                }
                return;
            }
            "abort_bash" => {
                self.abort_bash();
                Ok(None)
            }
            "get_session_stats" => Ok(Some(self.stats())),
            "export_html" => self.export_html(&req),
            "get_fork_messages" => Ok(Some(self.fork_messages())),
            "get_entries" => self.entries(&req),
            "get_tree" => {
                let data = self.tree_json();
                self.reply(&req, Ok(super::Data::Raw(data)));
                return;
            }
            "get_last_assistant_text" => Ok(Some(
                json!({"text": self.live.session.last_assistant_text()}),
            )),
            "set_session_name" => self.set_session_name(&req),
            "get_commands" => Ok(Some(self.commands())),
            "extension_ui_response" => {
                self.ui_response(&req);
                return;
            }
            other => Err(CommandError::unknown_command(other)),
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
                Deferred::Session(req) => {
                    let answer = self.change_session(&req).await;
                    self.respond(&req, answer);
                }
            }
        }
    }

    /// The user input of `prompt`/`steer`/`follow_up`, with a `/skill:NAME` or a `/template`
    /// expanded.
    pub(super) fn input(&self, req: &Request) -> Result<UserInput, CommandError> {
        let message = req.str("message")?;
        let images = req.images()?;
        let text = crate::skills::expand(message, &self.skills)
            .or_else(|| prompts::expand(message, &self.templates))
            .unwrap_or_else(|| message.to_string());
        Ok(UserInput { text, images })
    }

    pub(super) fn prompt(&mut self, req: &Request) -> Answer {
        let input = self.input(req)?;
        let behavior = req.choice("streamingBehavior", &["steer", "followUp"])?;
        let session = &self.live.session;
        if session.status().running {
            return match behavior.as_deref() {
                Some("steer") => {
                    session.steer_input(input);
                    Ok(Some(json!({"disposition": "queued"})))
                }
                Some(_) => {
                    session.follow_up_input(input);
                    Ok(Some(json!({"disposition": "queued"})))
                }
                None => Err(busy(BUSY)),
            };
        }
        match session.prompt_input(input) {
            Ok(_run) => Ok(Some(json!({"disposition": "started"}))),
            Err(_) if session.status().compacting => Err(busy(
                "The session is being compacted; send the prompt when compaction_end arrives",
            )),
            Err(_) => Err(busy(BUSY)),
        }
    }

    pub(super) fn queue(&mut self, req: &Request) -> Answer {
        let input = self.input(req)?;
        if req.command == "steer" {
            self.live.session.steer_input(input);
        } else {
            self.live.session.follow_up_input(input);
        }
        Ok(Some(json!({"disposition": "queued"})))
    }

    pub(super) async fn set_model(&mut self, req: &Request) -> Answer {
        let provider = req.str("provider")?;
        let model_id = req.str("modelId")?;
        let p = self.models.build(provider, model_id).await;
        let p = p?;
        self.live.session.set_model(p);
        Ok(Some(self.model_json()))
    }

    pub(super) async fn cycle_model(&mut self) -> Value {
        let models = self.models.available().await;
        if models.len() < 2 {
            return Value::Null;
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
                return json!({
                    "model": self.model_json(),
                    "thinkingLevel": self.live.session.thinking_level(),
                    "isScoped": false,
                });
            }
        }
        Value::Null
    }

    pub(super) fn set_thinking_level(&mut self, req: &Request) -> Answer {
        let mut allowed: Vec<&str> = THINKING_LEVELS.to_vec();
        allowed.push("max");
        let level = req
            .choice("level", &allowed)?
            .ok_or_else(|| missing("set_thinking_level", "level"))?;
        let level = if level == "max" {
            "xhigh".into()
        } else {
            level
        };
        self.live.session.set_thinking_level(&level);
        Ok(None)
    }

    pub(super) fn cycle_thinking_level(&mut self) -> Value {
        let levels = self.live.session.provider().info().thinking_levels.clone();
        if levels.len() < 2 {
            return Value::Null;
        }
        let current = self.live.session.thinking_level();
        let at = levels.iter().position(|l| *l == current).unwrap_or(0);
        let next = &levels[(at + 1) % levels.len()];
        let level = self.live.session.set_thinking_level(next);
        json!({"level": level})
    }

    pub(super) fn set_queue_mode(&mut self, req: &Request) -> Answer {
        let mode = match req.choice("mode", &["all", "one-at-a-time"])?.as_deref() {
            Some("all") => QueueMode::All,
            Some(_) => QueueMode::OneAtATime,
            None => return Err(missing(&req.command, "mode")),
        };
        if req.command == "set_steering_mode" {
            self.live.session.set_steering_mode(mode);
        } else {
            self.live.session.set_follow_up_mode(mode);
        }
        Ok(None)
    }

    pub(super) fn ui_response(&mut self, req: &Request) {
        let Some(id) = req.id.as_ref().and_then(rpc::Id::as_string) else {
            tracing::warn!("extension_ui_response without a string id");
            return;
        };
        self.open_dialogs.remove(&id);
        let Some(call_id) = self.approvals.answer(&id) else {
            tracing::debug!("extension_ui_response for unknown or closed dialog {id}");
            return;
        };
        let allow = req.opt_bool("confirmed").ok().flatten() == Some(true)
            && req.opt_bool("cancelled").ok().flatten() != Some(true);
        let decision = if allow {
            ApprovalDecision::Allow
        } else {
            ApprovalDecision::Deny
        };
        self.live.session.approve(&call_id, decision);
    }
}

/// A refusal because a run or a compaction is active.
fn busy(message: &str) -> CommandError {
    CommandError::new(CommandErrorKind::Busy, message)
}

/// pi's text for a required string field `key` of `command` that is absent.
fn missing(command: &str, key: &str) -> CommandError {
    CommandError::new(
        CommandErrorKind::InvalidParams(ParamErrorKind::Missing),
        format!("{command}: field `{key}` is missing (a string)"),
    )
}
