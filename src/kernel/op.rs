//! What front ends ask of the kernel. Every front end sends these through
//! [`crate::kernel::agent::AgentSession::submit`]; none of them touches kernel state directly.

use crate::kernel::event::ApprovalDecision;
use crate::kernel::message::{Content, Message, UserMessage};

/// A message from the user: text and any images (`Content::Image` blocks).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UserInput {
    pub text: String,
    pub images: Vec<Content>,
}

impl UserInput {
    pub fn text(text: impl Into<String>) -> Self {
        UserInput {
            text: text.into(),
            images: Vec::new(),
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
