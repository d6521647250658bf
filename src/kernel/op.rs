//! What front ends ask of the kernel. Every front end sends these through
//! [`crate::kernel::agent::AgentSession::submit`]; none of them touches kernel state directly.

use std::sync::Arc;

use crate::kernel::event::ApprovalDecision;
use crate::kernel::message::{Content, Message, UserMessage};
use crate::kernel::policy::Rules;
use crate::kernel::provider::Provider;

/// A message from the user: text and any images (`Content::Image` blocks), and the options it
/// runs with (a Claude command's `model` and `allowed-tools`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<Content>,
    pub options: PromptOptions,
}

/// What a prompt asks of the run beyond its text, in force from the turn that sends it to the
/// end of the run (a follow-up's replace them; a steering message's replace them only when it
/// carries some). The session's own model and rules are untouched: the next prompt without
/// options runs with them again.
#[derive(Debug, Clone, Default)]
pub struct PromptOptions {
    /// The model its turns call, subagents and compaction included (`None`: the session's).
    pub model: Option<Arc<dyn Provider>>,
    /// Allow rules checked last: after the settings' rules (so a `deny` or `ask` rule still
    /// wins) and the session's "always" answers, before the permission mode.
    pub allowed: Rules,
}

impl PromptOptions {
    /// No model and no rule: the session's own.
    pub fn is_empty(&self) -> bool {
        self.model.is_none() && self.allowed.is_empty()
    }
}

/// Options compare by the model's provider and id and by the rules as written.
impl PartialEq for PromptOptions {
    fn eq(&self, other: &Self) -> bool {
        let model = |o: &PromptOptions| {
            o.model
                .as_ref()
                .map(|p| (p.name().to_string(), p.model().to_string()))
        };
        model(self) == model(other) && self.allowed.entries() == other.allowed.entries()
    }
}

impl UserInput {
    pub fn text(text: impl Into<String>) -> Self {
        UserInput {
            text: text.into(),
            images: Vec::new(),
            options: PromptOptions::default(),
        }
    }

    /// The user message: the text block first, then the images.
    pub fn into_message(self, timestamp: i64) -> Message {
        let mut content = Vec::with_capacity(1 + self.images.len());
        content.push(Content::text(self.text));
        content.extend(self.images);
        Message::from(UserMessage { content, timestamp })
    }
}

/// How queued messages are released at a turn boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    /// One message per boundary (pi's default).
    #[default]
    OneAtATime,
    /// Every queued message at once.
    All,
}

/// A request to the kernel.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Start a run with this user message (refused while a run is active).
    Prompt { text: String },
    /// Deliver this message at the next turn boundary of the active (or next) run.
    Steer { text: String },
    /// Deliver this message when the agent would otherwise stop.
    FollowUp { text: String },
    /// Stop the active run as soon as possible; queues are left alone.
    Abort,
    /// Empty both queues.
    ClearQueue,
    /// Answer an `ApprovalRequested` event.
    Approve {
        call_id: String,
        decision: ApprovalDecision,
    },
    /// Summarise the older conversation now (while idle); the outcome arrives as
    /// `CompactionStarted` / `CompactionFinished` events.
    Compact { instructions: Option<String> },
    /// Turn automatic retries of failed model calls on or off.
    SetAutoRetry { enabled: bool },
    /// Turn automatic compaction on or off.
    SetAutoCompaction { enabled: bool },
}
