use std::borrow::Cow;

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::*;

fn job(id: u32, state: JobState, bytes: u64, command: &str) -> JobInfo {
    JobInfo {
        id: JobId(id),
        command: command.into(),
        pid: Some(4000 + id as i32),
        tty: false,
        state,
        exit_code: (state == JobState::Exited).then_some(0),
        signal: None,
        bytes,
        started_ms: 0,
        ended_ms: None,
        repaired: Vec::new(),
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::from(code)
}

fn screen(jobs: &Jobs) -> String {
    let area = Rect::new(0, 0, 70, jobs.desired_height(20));
    let mut buf = Buffer::empty(area);
    jobs.render(area, &mut buf);
    (0..area.height)
        .map(|y| crate::front::tui::paint::row_text(&buf, y))
        .collect::<Vec<_>>()
        .join("\n")
}

fn read(id: u32, from: u64, text: &str) -> JobReadData {
    JobReadData {
        id: JobId(id),
        from,
        next: from + text.len() as u64,
        dropped: 0,
        data: crate::wire::pi::data::encode_base64(text.as_bytes()),
    }
}

#[test]
fn the_list_shows_running_jobs_first_and_counts_them() {
    let mut j = Jobs::default();
    j.listed(vec![
        job(1, JobState::Exited, 10, "make"),
        job(2, JobState::Running, 2048, "npm run dev"),
    ]);
    assert_eq!(j.running(), 1);
    j.open();
    let s = screen(&j);
    assert!(s.contains("Jobs · 1 running · 2 in all"), "{s}");
    let two = s.find("#2").unwrap();
    let one = s.find("#1").unwrap();
    assert!(two < one, "{s}");
    assert!(
        s.contains("› #2  running   4002  2.0 KiB  npm run dev"),
        "{s}"
    );
    assert!(s.contains("exited 0"), "{s}");
}

#[test]
fn enter_tails_and_each_output_event_reads_from_the_tail_offset() {
    let mut j = Jobs::default();
    j.listed(vec![job(1, JobState::Running, 6, "echo ready; sleep 1000")]);
    j.open();
    assert_eq!(
        j.handle_key(key(KeyCode::Enter)),
        JobsKey::Read(JobId(1), 0)
    );
    // A read is under way: the event is remembered, not read twice.
    let out = WireEvent::JobOutput {
        id: JobId(1),
        next: 9,
    };
    assert_eq!(j.on_event(&out), None);
    assert_eq!(j.on_read(Ok(read(1, 0, "ready\n"))), Some((JobId(1), 6)));
    assert_eq!(j.on_read(Ok(read(1, 6, "ab\n"))), None);
    let s = screen(&j);
    assert!(s.contains("Job 1 · running"), "{s}");
    assert!(s.contains("ready") && s.contains("ab"), "{s}");
    let out = WireEvent::JobOutput {
        id: JobId(1),
        next: 12,
    };
    assert_eq!(j.on_event(&out), Some((JobId(1), 9)));
    // Esc goes back to the list; Esc again closes.
    assert_eq!(j.handle_key(key(KeyCode::Esc)), JobsKey::None);
    assert!(screen(&j).contains("Jobs · 1 running"));
    assert_eq!(j.handle_key(key(KeyCode::Esc)), JobsKey::Close);
}

#[test]
fn k_asks_once_and_only_yes_kills() {
    let mut j = Jobs::default();
    j.listed(vec![job(3, JobState::Running, 0, "sleep 1000")]);
    j.open();
    assert_eq!(j.handle_key(key(KeyCode::Char('k'))), JobsKey::None);
    assert!(screen(&j).contains("Kill job 3 (`sleep 1000`)?"));
    assert_eq!(j.handle_key(key(KeyCode::Char('n'))), JobsKey::None);
    assert!(!screen(&j).contains("Kill job 3"));
    j.handle_key(key(KeyCode::Char('k')));
    assert_eq!(
        j.handle_key(key(KeyCode::Char('y'))),
        JobsKey::Kill(JobId(3))
    );
    let ended = WireEvent::JobEnded {
        job: Cow::Owned(job(3, JobState::Killed, 0, "sleep 1000")),
    };
    j.on_event(&ended);
    assert_eq!(j.running(), 0);
    assert!(screen(&j).contains("killed"));
    // An ended job is not asked about.
    j.handle_key(key(KeyCode::Char('k')));
    assert!(!screen(&j).contains("Kill job 3"));
}
