//! When a scheduled task runs: pure functions of the task, its state and a given time (no
//! clock is read here, so tests pass any zone and instant). `--every` counts elapsed time
//! from the last run (daylight-saving changes do not move it); a cron expression is evaluated
//! in the zone of the time it is given (the daemon gives `chrono::Local`) by `croner`, which
//! follows Vixie cron across DST: a fixed time skipped by spring-forward runs at the first
//! time after the gap (02:30 → 03:00), a fixed time repeated by fall-back runs once (at its
//! first occurrence). A task runs once however many of its slots passed while no daemon ran:
//! the next slot counts from the latest of its creation, its last run and its last skip.

use std::collections::HashSet;

use chrono::{DateTime, TimeZone};
use croner::parser::{CronParser, Seconds, Year};

use super::{ScheduleError, ScheduleErrorKind, Task};

/// A task's schedule, parsed.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Seconds between runs.
    Every(u64),
    Cron(Box<croner::Cron>),
}

impl Schedule {
    /// The schedule of `task`: exactly one of `every` and `cron`.
    pub fn of(task: &Task) -> Result<Schedule, ScheduleError> {
        let shape = |message: &str| Err(ScheduleError::new(ScheduleErrorKind::Shape, message));
        match (task.every, task.cron.as_deref()) {
            (Some(0), None) => shape("every is 0 seconds"),
            (Some(secs), None) => Ok(Schedule::Every(secs)),
            (None, Some(expr)) => parse_cron(expr).map(|c| Schedule::Cron(Box::new(c))),
            (Some(_), Some(_)) => shape("give --every or --cron, not both"),
            (None, None) => shape("give --every or --cron"),
        }
    }

    /// How `keel schedule list` shows it.
    pub fn text(&self) -> String {
        match self {
            Schedule::Every(secs) => format!("every {}", super::every_text(*secs)),
            Schedule::Cron(c) => format!("cron {}", c.pattern.as_str()),
        }
    }
}

/// A 5-field cron expression (minute hour day-of-month month day-of-week; names, ranges,
/// steps, lists, `L`, `#`, `W` and `@daily`-style nicknames as `croner` reads them).
pub fn parse_cron(expr: &str) -> Result<croner::Cron, ScheduleError> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| {
            ScheduleError::new(
                ScheduleErrorKind::Cron,
                format!("--cron {expr:?} is not a 5-field cron expression: {e}"),
            )
        })
}

/// The first run after `anchor` (an instant in the zone to evaluate in). `None`: the cron
/// expression never matches again.
pub fn next_due<Tz: TimeZone>(schedule: &Schedule, anchor: &DateTime<Tz>) -> Option<DateTime<Tz>> {
    match schedule {
        Schedule::Every(secs) => {
            let secs = i64::try_from(*secs).ok()?;
            anchor
                .clone()
                .checked_add_signed(chrono::TimeDelta::try_seconds(secs)?)
        }
        Schedule::Cron(c) => c.find_next_occurrence(anchor, false).ok(),
    }
}

/// Where the next slot counts from: the latest of the task's creation, last run and last skip
/// (in `tz`). `None` if none of them reads as RFC 3339 (the store checks `created`).
pub fn anchor<Tz: TimeZone>(task: &Task, tz: &Tz) -> Option<DateTime<Tz>> {
    [
        Some(&task.created),
        task.state.last_run.as_ref(),
        task.state.skipped_at.as_ref(),
    ]
    .into_iter()
    .flatten()
    .filter_map(|s| DateTime::parse_from_rfc3339(s).ok())
    .max()
    .map(|t| t.with_timezone(tz))
}

/// When `task` runs next (in `now`'s zone); `None` when paused or never again.
pub fn next_run<Tz: TimeZone>(task: &Task, tz: &Tz) -> Option<DateTime<Tz>> {
    if task.paused {
        return None;
    }
    next_due(&Schedule::of(task).ok()?, &anchor(task, tz)?)
}

/// What to do with a task that is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Start a run.
    Run,
    /// Its previous run is still going: this slot is skipped (and counted).
    Skip,
}

/// The tasks due at `now` (not paused, next slot at or before `now`): run, or skip those
/// whose previous run is still `running`. Many passed slots still mean one run.
pub fn due_now<Tz: TimeZone>(
    tasks: &[Task],
    running: &HashSet<String>,
    now: &DateTime<Tz>,
) -> Vec<(String, Due)> {
    let tz = now.timezone();
    tasks
        .iter()
        .filter(|t| next_run(t, &tz).is_some_and(|at| at <= *now))
        .map(|t| {
            let due = match running.contains(&t.name) {
                true => Due::Skip,
                false => Due::Run,
            };
            (t.name.clone(), due)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::schedule::TaskState;
    use chrono_tz::America::New_York;

    fn task(every: Option<u64>, cron: Option<&str>, created: &str) -> Task {
        Task {
            name: "t".into(),
            every,
            cron: cron.map(str::to_string),
            cwd: "/tmp".into(),
            spec: Default::default(),
            args: Vec::new(),
            prompt: "p".into(),
            env: Default::default(),
            on_failure: None,
            paused: false,
            created: created.into(),
            state: TaskState::default(),
        }
    }

    fn ny(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<chrono_tz::Tz> {
        New_York
            .with_ymd_and_hms(y, mo, d, h, mi, 0)
            .earliest()
            .unwrap()
    }

    fn cron(expr: &str) -> Schedule {
        Schedule::Cron(Box::new(parse_cron(expr).unwrap()))
    }

    #[test]
    fn every_counts_elapsed_time_from_the_anchor_even_across_dst() {
        let s = Schedule::Every(1800);
        let at = ny(2026, 6, 1, 12, 0);
        assert_eq!(next_due(&s, &at).unwrap(), ny(2026, 6, 1, 12, 30));
        // Spring forward (2026-03-08 02:00 EST → 03:00 EDT): one hour after 01:30 EST is
        // 03:30 EDT on the wall clock.
        let s = Schedule::Every(3600);
        let before = ny(2026, 3, 8, 1, 30);
        let next = next_due(&s, &before).unwrap();
        assert_eq!(next, ny(2026, 3, 8, 3, 30));
        assert_eq!((next - before).num_seconds(), 3600);
    }

    #[test]
    fn cron_in_a_skipped_hour_runs_right_after_the_gap() {
        // 02:30 does not exist on 2026-03-08 in New York: the job runs at 03:00 EDT that day,
        // then at 02:30 again the next day.
        let s = cron("30 2 * * *");
        let first = next_due(&s, &ny(2026, 3, 7, 3, 0)).unwrap();
        assert_eq!(first, ny(2026, 3, 8, 3, 0));
        assert_eq!(first.to_rfc3339(), "2026-03-08T03:00:00-04:00");
        let second = next_due(&s, &first).unwrap();
        assert_eq!(second, ny(2026, 3, 9, 2, 30));
    }

    #[test]
    fn cron_in_a_repeated_hour_runs_once() {
        // 01:30 happens twice on 2026-11-01 (EDT, then EST): the job runs at the first one
        // only, then the next day.
        let s = cron("30 1 * * *");
        let first = next_due(&s, &ny(2026, 10, 31, 12, 0)).unwrap();
        assert_eq!(first.to_rfc3339(), "2026-11-01T01:30:00-04:00");
        let second = next_due(&s, &first).unwrap();
        assert_eq!(second.to_rfc3339(), "2026-11-02T01:30:00-05:00");
    }

    #[test]
    fn a_schedule_that_is_not_exactly_one_of_every_and_cron_is_a_shape_error() {
        let at = "2026-11-20T06:00:00-05:00";
        for t in [
            task(None, None, at),
            task(Some(60), Some("0 7 * * *"), at),
            task(Some(0), None, at),
        ] {
            let e = Schedule::of(&t).unwrap_err();
            assert_eq!(e.kind, ScheduleErrorKind::Shape, "{e}");
        }
        let e = Schedule::of(&task(None, Some("every day"), at)).unwrap_err();
        assert_eq!(e.kind, ScheduleErrorKind::Cron, "{e}");
    }

    #[test]
    fn cron_expressions_are_five_fields_and_bad_ones_are_named() {
        let s = cron("0 7 * * 1-5");
        // 2026-12-04 is a Friday: the next weekday 07:00 is Monday the 7th.
        let next = next_due(&s, &ny(2026, 12, 4, 8, 0)).unwrap();
        assert_eq!(next, ny(2026, 12, 7, 7, 0));
        for bad in ["61 * * * *", "* * * *", "0 0 7 * * *", "every day"] {
            let e = parse_cron(bad).unwrap_err();
            assert!(e.message.contains(bad), "{bad}: {e}");
            assert_eq!(e.kind, ScheduleErrorKind::Cron, "{bad}");
        }
    }

    #[test]
    fn many_missed_slots_mean_one_run_then_the_schedule_counts_from_it() {
        let mut t = task(None, Some("0 7 * * *"), "2026-11-20T06:00:00-05:00");
        t.state.last_run = Some("2026-11-21T07:00:00-05:00".into());
        // The daemon was down for three days.
        let now = ny(2026, 11, 24, 12, 0);
        let none = HashSet::new();
        assert_eq!(due_now(&[t.clone()], &none, &now), [("t".into(), Due::Run)]);
        t.state.last_run = Some(now.to_rfc3339());
        let later = ny(2026, 11, 24, 12, 1);
        assert!(due_now(&[t.clone()], &none, &later).is_empty(), "ran once");
        assert_eq!(next_run(&t, &New_York).unwrap(), ny(2026, 11, 25, 7, 0));
        // `--every` too: one run, then one interval from it.
        let mut e = task(Some(1800), None, "2026-11-20T06:00:00-05:00");
        assert_eq!(due_now(&[e.clone()], &none, &now).len(), 1);
        e.state.last_run = Some(now.to_rfc3339());
        assert_eq!(next_run(&e, &New_York).unwrap(), ny(2026, 11, 24, 12, 30));
    }

    #[test]
    fn a_running_task_is_skipped_and_a_paused_one_never_due() {
        let mut t = task(Some(60), None, "2026-11-24T12:00:00-05:00");
        let now = ny(2026, 11, 24, 12, 5);
        let running: HashSet<String> = ["t".to_string()].into();
        assert_eq!(
            due_now(&[t.clone()], &running, &now),
            [("t".into(), Due::Skip)]
        );
        // The skip counts as the slot: the next is one interval later.
        t.state.skipped_at = Some(now.to_rfc3339());
        assert!(due_now(&[t.clone()], &running, &now).is_empty());
        assert_eq!(next_run(&t, &New_York).unwrap(), ny(2026, 11, 24, 12, 6));
        t.paused = true;
        let much_later = ny(2027, 1, 1, 0, 0);
        assert!(due_now(&[t.clone()], &HashSet::new(), &much_later).is_empty());
        assert_eq!(next_run(&t, &New_York), None);
    }
}
