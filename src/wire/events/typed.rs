//! A wire event handed over in this process beside its line: the kernel event it was made
//! from, so a front end of a session served here reads it typed instead of parsing the line
//! back (`DESIGN.md` §2: no parse per event in-process). Over the socket only the line travels.

use std::sync::Arc;

use super::{stream_events, WireEvent};
use crate::kernel::event::Event;

/// One event of a session's stream, typed: which of [`stream_events`]' events of `event` it
/// is, and its `type`. What [`TypedEvent::wire`] gives is what parsing the event's line gives
/// (fields the wire leaves out, such as a compaction's entry id, may be filled in).
#[derive(Debug, Clone)]
pub struct TypedEvent {
    event: Arc<Event>,
    index: usize,
    kind: &'static str,
}

impl TypedEvent {
    /// The `index`th stream event of `event`, of type `kind`.
    pub fn new(event: Arc<Event>, index: usize, kind: &'static str) -> TypedEvent {
        TypedEvent { event, index, kind }
    }

    /// The event's `type`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The wire event, borrowing the kernel's.
    pub fn wire(&self) -> Option<WireEvent<'_>> {
        stream_events(&self.event).into_iter().nth(self.index)
    }
}

/// The same event of the same kernel event (not a comparison of contents).
impl PartialEq for TypedEvent {
    fn eq(&self, other: &TypedEvent) -> bool {
        Arc::ptr_eq(&self.event, &other.event) && self.index == other.index
    }
}

impl Eq for TypedEvent {}

/// The event a stream line carries: typed when it came with one (a session in this
/// process), else parsed from the line.
pub fn event_of<'a>(line: &str, typed: Option<&'a TypedEvent>) -> Option<WireEvent<'a>> {
    match typed {
        Some(t) => t.wire(),
        None => WireEvent::parse(line),
    }
}
