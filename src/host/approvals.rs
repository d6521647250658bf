//! The host's open approval dialogs and their timers (`--approval-timeout`): which tool call
//! each dialog decides, and which timer may still deny it. The timeout counts only while no
//! interactive client watches the session: a dialog opened unwatched starts its timer at once;
//! while watched, dialogs wait; when the last watcher leaves, every open dialog starts a fresh
//! timer. Pure bookkeeping: it never sleeps, spawns or touches the session (the host starts the
//! [`Timer`]s it is handed and reports them back with [`Approvals::fire`]).

use std::collections::HashMap;

/// A timer the host must start: when it runs out, `fire(dialog, generation)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    pub dialog: String,
    pub generation: u64,
}

/// One open dialog: the tool call it decides and the generation of its live timer (`None`:
/// waiting with no timer, while watched).
#[derive(Debug)]
struct Open {
    call_id: String,
    timer: Option<u64>,
}

/// Open approval dialogs by request id.
#[derive(Debug, Default)]
pub struct Approvals {
    open: HashMap<String, Open>,
    /// At least one interactive client is attached.
    watched: bool,
    /// The last timer generation handed out (each timer gets a new one, so a stale timer of
    /// a restarted or cancelled dialog never matches).
    generation: u64,
}

impl Approvals {
    /// Opens dialog `id` for tool call `call_id`; the timer to start, unless watched.
    pub fn open(&mut self, id: &str, call_id: &str) -> Option<Timer> {
        let timer = (!self.watched).then(|| self.timer(id));
        let generation = timer.as_ref().map(|t| t.generation);
        self.open.insert(
            id.to_string(),
            Open {
                call_id: call_id.to_string(),
                timer: generation,
            },
        );
        timer
    }

    /// Whether an interactive client watches the session. Becoming watched cancels every
    /// timer; becoming unwatched starts a fresh one for every open dialog (returned).
    pub fn set_watched(&mut self, watched: bool) -> Vec<Timer> {
        if watched == self.watched {
            return Vec::new();
        }
        self.watched = watched;
        let mut ids: Vec<String> = self.open.keys().cloned().collect();
        ids.sort();
        let mut timers = Vec::new();
        for id in ids {
            let timer = (!watched).then(|| self.timer(&id));
            let generation = timer.as_ref().map(|t| t.generation);
            if let Some(open) = self.open.get_mut(&id) {
                open.timer = generation;
            }
            timers.extend(timer);
        }
        timers
    }

    /// A timer ran out: the tool call to deny if it is dialog `id`'s live timer (the dialog
    /// is closed); `None` for a stale timer or a dialog already closed.
    pub fn fire(&mut self, id: &str, generation: u64) -> Option<String> {
        if self.open.get(id)?.timer != Some(generation) {
            return None;
        }
        self.answer(id)
    }

    /// Closes dialog `id` (answered); its tool call, if it was open.
    pub fn answer(&mut self, id: &str) -> Option<String> {
        self.open.remove(id).map(|o| o.call_id)
    }

    /// Closes every dialog (the run settled, or nobody can answer any more); their tool calls.
    pub fn close_all(&mut self) -> Vec<String> {
        self.open.drain().map(|(_, o)| o.call_id).collect()
    }

    fn timer(&mut self, id: &str) -> Timer {
        self.generation += 1;
        Timer {
            dialog: id.to_string(),
            generation: self.generation,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn gens(timers: &[Timer]) -> Vec<(&str, u64)> {
        timers
            .iter()
            .map(|t| (t.dialog.as_str(), t.generation))
            .collect()
    }

    #[test]
    fn an_unwatched_dialog_times_out_on_its_own_timer() {
        let mut a = Approvals::default();
        let t = a.open("d1", "call_1").unwrap();
        assert_eq!(a.fire("d1", t.generation + 1), None, "another timer");
        assert_eq!(a.fire("d1", t.generation).as_deref(), Some("call_1"));
        assert_eq!(a.fire("d1", t.generation), None, "closed once");
    }

    #[test]
    fn a_watched_dialog_has_no_timer_until_the_last_watcher_leaves() {
        let mut a = Approvals::default();
        assert!(a.set_watched(true).is_empty(), "nothing open yet");
        assert_eq!(a.open("d1", "call_1"), None, "watched: no timer");
        assert!(a.set_watched(true).is_empty(), "no change");
        // Every generation handed out so far is stale for a waiting dialog.
        assert_eq!(a.fire("d1", 0), None);
        let timers = a.set_watched(false);
        assert_eq!(gens(&timers), [("d1", 1)]);
        assert_eq!(a.fire("d1", 1).as_deref(), Some("call_1"));
    }

    #[test]
    fn watching_again_cancels_the_restarted_timers() {
        let mut a = Approvals::default();
        let first = a.open("d1", "call_1").unwrap();
        a.set_watched(true);
        assert_eq!(
            a.fire("d1", first.generation),
            None,
            "cancelled by watching"
        );
        let second = a.open("d2", "call_2");
        assert_eq!(second, None);
        let restarted = a.set_watched(false);
        assert_eq!(gens(&restarted), [("d1", 2), ("d2", 3)], "fresh timers");
        assert!(a.set_watched(true).is_empty(), "watching starts nothing");
        for t in &restarted {
            assert_eq!(a.fire(&t.dialog, t.generation), None, "{t:?} was cancelled");
        }
        let again = a.set_watched(false);
        assert_eq!(gens(&again), [("d1", 4), ("d2", 5)]);
        assert_eq!(a.fire("d2", 5).as_deref(), Some("call_2"));
        assert_eq!(a.answer("d1").as_deref(), Some("call_1"));
        assert_eq!(a.fire("d1", 4), None, "answered before its timer ran out");
    }

    #[test]
    fn closing_all_returns_every_open_call() {
        let mut a = Approvals::default();
        a.open("d1", "call_1");
        a.set_watched(true);
        a.open("d2", "call_2");
        let mut calls = a.close_all();
        calls.sort();
        assert_eq!(calls, ["call_1", "call_2"]);
        assert!(a.set_watched(false).is_empty(), "nothing left to time");
    }
}
