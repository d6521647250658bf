//! A request's fields read into a [`Command`], one field at a time in the order pi's host has
//! always read them, so the first unusable field is the one named in the error, with the
//! same text (`Request`'s accessors). Never reads a field a command does not take.

use serde_json::Value;

use super::{Command, CommandName, DeliveryMode, NewSessionReason, StreamingBehavior};
use crate::kernel::jobs::JobId;
use crate::kernel::provider::model::THINKING_LEVELS;
use crate::wire::rpc::{self, ParamError, ParamErrorKind, Request};

impl CommandName {
    /// `req`'s fields as this command's; the error names the first unusable field.
    pub fn decode(self, req: &Request) -> Result<Command, ParamError> {
        use CommandName as N;
        let opt = |key: &str| -> Result<Option<String>, ParamError> {
            Ok(req.opt_str(key)?.map(str::to_string))
        };
        let string = |key: &str| -> Result<String, ParamError> { Ok(req.str(key)?.to_string()) };
        Ok(match self {
            N::Prompt => Command::Prompt {
                message: string("message")?,
                images: req.images()?,
                streaming_behavior: streaming_behavior(req)?,
            },
            N::Steer => Command::Steer {
                message: string("message")?,
                images: req.images()?,
            },
            N::FollowUp => Command::FollowUp {
                message: string("message")?,
                images: req.images()?,
            },
            N::Abort => Command::Abort {},
            N::ClearQueue => Command::ClearQueue {},
            N::NewSession => Command::NewSession {
                parent_session: opt("parentSession")?,
                reason: req
                    .choice("reason", &["clear"])?
                    .map(|_| NewSessionReason::Clear),
            },
            N::SwitchSession => Command::SwitchSession {
                session_path: string("sessionPath")?,
            },
            N::Fork => Command::Fork {
                entry_id: string("entryId")?,
            },
            N::Clone => Command::Clone {},
            N::GetState => Command::GetState {},
            N::GetMessages => Command::GetMessages {},
            N::SetModel => Command::SetModel {
                provider: string("provider")?,
                model_id: string("modelId")?,
            },
            N::CycleModel => Command::CycleModel {},
            N::GetAvailableModels => Command::GetAvailableModels {},
            N::SetThinkingLevel => Command::SetThinkingLevel {
                level: thinking_level(req)?,
            },
            N::CycleThinkingLevel => Command::CycleThinkingLevel {},
            N::GetAvailableThinkingLevels => Command::GetAvailableThinkingLevels {},
            N::SetSteeringMode => Command::SetSteeringMode {
                mode: delivery_mode(req)?,
            },
            N::SetFollowUpMode => Command::SetFollowUpMode {
                mode: delivery_mode(req)?,
            },
            N::Compact => Command::Compact {
                custom_instructions: opt("customInstructions")?,
            },
            N::SetAutoCompaction => Command::SetAutoCompaction {
                enabled: req.bool("enabled")?,
            },
            N::SetAutoRetry => Command::SetAutoRetry {
                enabled: req.bool("enabled")?,
            },
            N::AbortRetry => Command::AbortRetry {},
            N::Bash => Command::Bash {
                command: string("command")?,
                exclude_from_context: req.opt_bool("excludeFromContext")?,
            },
            N::AbortBash => Command::AbortBash {},
            N::GetSessionStats => Command::GetSessionStats {},
            N::ExportHtml => Command::ExportHtml {
                output_path: opt("outputPath")?,
            },
            N::GetForkMessages => Command::GetForkMessages {},
            N::GetEntries => Command::GetEntries {
                since: opt("since")?,
            },
            N::GetTree => Command::GetTree {},
            N::GetLastAssistantText => Command::GetLastAssistantText {},
            N::SetSessionName => Command::SetSessionName {
                name: string("name")?,
            },
            N::GetCommands => Command::GetCommands {},
            N::ExtensionUiResponse => ui_response(req),
            N::GetPermissions => Command::GetPermissions {},
            N::SetPermissionMode => Command::SetPermissionMode {
                mode: req
                    .choice("mode", PERMISSION_MODES)?
                    .ok_or_else(|| missing(req, "mode"))?,
            },
            N::Rewind => Command::Rewind {
                entry_id: string("entryId")?,
                restore: restore(req)?,
            },
            N::RewindUndo => Command::RewindUndo {},
            N::GetCheckpoints => Command::GetCheckpoints {},
            N::RewindPreview => Command::RewindPreview {
                entry_id: string("entryId")?,
            },
            N::GetJobs => Command::GetJobs {},
            N::ReadJob => Command::ReadJob {
                job_id: job_id(req)?,
                since: number(req, "since", u64::MAX)?,
                max: number(req, "max", u64::MAX)?,
            },
            N::KillJob => Command::KillJob {
                job_id: job_id(req)?,
            },
            N::WriteJob => Command::WriteJob {
                job_id: job_id(req)?,
                data: string("data")?,
            },
            N::ResizeJob => Command::ResizeJob {
                job_id: job_id(req)?,
                cols: size(req, "cols")?,
                rows: size(req, "rows")?,
            },
        })
    }
}

impl Command {
    /// `req` as a command: `None` when its `type` names no command (pi's "Unknown command"),
    /// else its fields read as [`CommandName::decode`] reads them.
    pub fn decode(req: &Request) -> Option<Result<Command, ParamError>> {
        CommandName::parse(&req.command).map(|name| name.decode(req))
    }
}

fn streaming_behavior(req: &Request) -> Result<Option<StreamingBehavior>, ParamError> {
    let word = req.choice("streamingBehavior", &["steer", "followUp"])?;
    Ok(word.map(|w| match w.as_str() {
        "steer" => StreamingBehavior::Steer,
        _ => StreamingBehavior::FollowUp,
    }))
}

/// `level`: one of the thinking levels or `max`; absent is pi's "missing (a string)".
fn thinking_level(req: &Request) -> Result<String, ParamError> {
    let mut allowed: Vec<&str> = THINKING_LEVELS.to_vec();
    allowed.push("max");
    req.choice("level", &allowed)?
        .ok_or_else(|| missing(req, "level"))
}

/// The words `set_permission_mode` takes: keel's, then Claude's aliases.
const PERMISSION_MODES: &[&str] = &[
    "ask",
    "accept-edits",
    "auto",
    "read-only",
    "plan",
    "default",
    "acceptEdits",
    "bypassPermissions",
];
/// `rewind`'s `restore`: `both`, `conversation` or `files` (absent: both).
fn restore(req: &Request) -> Result<Option<crate::kernel::checkpoint::Restore>, ParamError> {
    use crate::kernel::checkpoint::Restore;
    let word = req.choice("restore", &["both", "conversation", "files"])?;
    Ok(word.map(|w| match w.as_str() {
        "conversation" => Restore::Conversation,
        "files" => Restore::Files,
        _ => Restore::Both,
    }))
}

fn delivery_mode(req: &Request) -> Result<DeliveryMode, ParamError> {
    match req.choice("mode", &["all", "one-at-a-time"])?.as_deref() {
        Some("all") => Ok(DeliveryMode::All),
        Some(_) => Ok(DeliveryMode::OneAtATime),
        None => Err(missing(req, "mode")),
    }
}

/// `jobId`: a job's id (a whole number from 1).
fn job_id(req: &Request) -> Result<JobId, ParamError> {
    let id = number(req, "jobId", u64::from(u32::MAX))?
        .ok_or_else(|| absent(req, "jobId", "a job id: a whole number"))?;
    Ok(JobId(u32::try_from(id).unwrap_or(u32::MAX)))
}

/// A terminal's `cols` or `rows`: from 1 to 65535.
fn size(req: &Request, key: &str) -> Result<u16, ParamError> {
    let n = number(req, key, u64::from(u16::MAX))?
        .ok_or_else(|| absent(req, key, "a whole number from 1 to 65535"))?;
    match n {
        0 => Err(ParamError {
            kind: ParamErrorKind::NotAllowed,
            message: format!(
                "{}: field `{key}` must be from 1 to 65535, got 0",
                req.command
            ),
        }),
        n => Ok(u16::try_from(n).unwrap_or(u16::MAX)),
    }
}

/// An optional whole number up to `most` (absent or null is `None`).
fn number(req: &Request, key: &str, most: u64) -> Result<Option<u64>, ParamError> {
    let v = match req.fields().get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    match v.as_u64() {
        Some(n) if n <= most => Ok(Some(n)),
        Some(n) => Err(ParamError {
            kind: ParamErrorKind::NotAllowed,
            message: format!(
                "{}: field `{key}` must be at most {most}, got {n}",
                req.command
            ),
        }),
        None => {
            let got = match v {
                Value::Number(n) => n.to_string(),
                v => rpc::kind_of(v).to_string(),
            };
            Err(ParamError {
                kind: ParamErrorKind::WrongType,
                message: format!(
                    "{}: field `{key}` must be a whole number, got {got}",
                    req.command
                ),
            })
        }
    }
}

/// A required field `key` that is absent (`want`: what it must be).
fn absent(req: &Request, key: &str, want: &str) -> ParamError {
    ParamError {
        kind: ParamErrorKind::Missing,
        message: format!("{}: field `{key}` is missing ({want})", req.command),
    }
}

/// pi's text for a required string field `key` that is absent.
fn missing(req: &Request, key: &str) -> ParamError {
    ParamError {
        kind: ParamErrorKind::Missing,
        message: format!("{}: field `{key}` is missing (a string)", req.command),
    }
}

/// A dialog answer never fails: an unusable field counts as absent, and the dialog id is the
/// request's `id` (a string), not a field.
fn ui_response(req: &Request) -> Command {
    Command::ExtensionUiResponse {
        id: req.id.as_ref().and_then(rpc::Id::as_string),
        value: req.opt_str("value").ok().flatten().map(str::to_string),
        confirmed: req.opt_bool("confirmed").ok().flatten(),
        cancelled: req.opt_bool("cancelled").ok().flatten(),
    }
}
