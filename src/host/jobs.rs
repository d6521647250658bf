//! A served session's background jobs for its clients (issue 47, DESIGN §19): the commands
//! `get_jobs`, `read_job`, `kill_job`, `write_job` and `resize_job` over its job table, and
//! the table's events on the session's bus (`job_started`, `job_output` coalesced to one per
//! job every [`OUTPUT_EVERY`], `job_ended`). None of them changes the session file.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

use super::{Answer, CommandError, Data, Host, Internal, Reply};
use crate::host::dispatch::data;
use crate::kernel::bus::Bus;
use crate::kernel::event::EventPayload;
use crate::kernel::jobs::{JobEvent, JobId, Jobs};
use crate::wire::pi::data::{JobData, JobReadData, JobsData};
use crate::wire::pi::CommandName;
use crate::wire::rpc::Request;

/// At most one `job_output` per job this often.
pub const OUTPUT_EVERY: Duration = Duration::from_millis(10);

impl Host {
    /// `get_jobs`.
    pub(super) fn get_jobs(&self) -> Answer {
        Ok(data(&JobsData {
            jobs: self.live.jobs.list(),
        }))
    }

    /// `read_job`: up to `max` bytes from `since` (0), as base64.
    pub(super) fn read_job(&self, id: JobId, since: Option<u64>, max: Option<u64>) -> Answer {
        let max = max.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
        let chunk = self.live.jobs.read(id, since.unwrap_or(0), max)?;
        Ok(data(&JobReadData::of(id, &chunk)))
    }

    /// `write_job`: text typed into a terminal job.
    pub(super) fn write_job(&self, id: JobId, text: &str) -> Answer {
        self.live.jobs.write(id, text.as_bytes())?;
        Ok(None)
    }

    /// `resize_job`.
    pub(super) fn resize_job(&self, id: JobId, cols: u16, rows: u16) -> Answer {
        self.live.jobs.resize(id, cols, rows)?;
        Ok(None)
    }

    /// `kill_job`: answered once the job ended (up to its grace period and then some), while
    /// the session goes on serving.
    pub(super) fn kill_job(&self, req: &Request, id: JobId) {
        let jobs = self.live.jobs.clone();
        let tx = self.tx.clone();
        let req_id = req.id.clone();
        tokio::spawn(async move {
            let result = match jobs.kill(id).await {
                Ok(job) => Ok(Data::Json(
                    serde_json::to_value(JobData { job }).unwrap_or(Value::Null),
                )),
                Err(e) => Err(CommandError::from(e)),
            };
            let reply = Reply {
                id: req_id,
                command: CommandName::KillJob.as_str().into(),
                result,
            };
            let _ = tx.send(Internal::Reply(reply));
        });
    }
}

/// Publishes what happens to `jobs` on `bus` (as `EventPayload::Job`) until the table is
/// gone: `Output` coalesced to one per job every [`OUTPUT_EVERY`] (the last offset wins),
/// a job's pending `Output` always before its `Ended`. Call it before anything may start.
pub fn forward(jobs: &Jobs, bus: Bus) {
    let mut rx = jobs.subscribe();
    tokio::spawn(async move {
        let mut coalesce = Coalesce::default();
        loop {
            let due = coalesce.due();
            let event = tokio::select! {
                event = rx.recv() => event,
                () = sleep_until(due) => {
                    for event in coalesce.flush(Instant::now()) {
                        bus.publish_untimed(EventPayload::Job(event));
                    }
                    continue;
                }
            };
            let event = match event {
                Ok(e) => e,
                Err(RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "jobs: events were missed");
                    continue;
                }
                Err(RecvError::Closed) => break,
            };
            for event in coalesce.take(event, Instant::now()) {
                bus.publish_untimed(EventPayload::Job(event));
            }
        }
    });
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Per job: when its last `Output` went out, and the offset held back since.
#[derive(Default)]
struct Coalesce {
    sent: HashMap<JobId, Instant>,
    held: HashMap<JobId, u64>,
}

impl Coalesce {
    /// What to publish now for `event`.
    fn take(&mut self, event: JobEvent, now: Instant) -> Vec<JobEvent> {
        match event {
            JobEvent::Output { id, next } => {
                let recent = self
                    .sent
                    .get(&id)
                    .is_some_and(|at| now.duration_since(*at) < OUTPUT_EVERY);
                if recent {
                    self.held.insert(id, next);
                    return Vec::new();
                }
                self.sent.insert(id, now);
                vec![JobEvent::Output { id, next }]
            }
            JobEvent::Ended { info } => {
                let mut out = Vec::new();
                if let Some(next) = self.held.remove(&info.id) {
                    out.push(JobEvent::Output { id: info.id, next });
                }
                self.sent.remove(&info.id);
                out.push(JobEvent::Ended { info });
                out
            }
            started @ JobEvent::Started { .. } => vec![started],
        }
    }

    /// When the first held offset is due.
    fn due(&self) -> Option<Instant> {
        self.held
            .keys()
            .filter_map(|id| self.sent.get(id))
            .min()
            .map(|at| *at + OUTPUT_EVERY)
    }

    /// The held offsets that are due at `now`.
    fn flush(&mut self, now: Instant) -> Vec<JobEvent> {
        let due: Vec<JobId> = self
            .held
            .keys()
            .filter(|id| {
                self.sent
                    .get(id)
                    .is_none_or(|at| now.duration_since(*at) >= OUTPUT_EVERY)
            })
            .copied()
            .collect();
        due.into_iter()
            .filter_map(|id| {
                let next = self.held.remove(&id)?;
                self.sent.insert(id, now);
                Some(JobEvent::Output { id, next })
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn output(id: u32, next: u64) -> JobEvent {
        JobEvent::Output {
            id: JobId(id),
            next,
        }
    }

    #[test]
    fn output_is_coalesced_per_job_and_flushed_before_its_end() {
        let mut c = Coalesce::default();
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(c.take(output(1, 5), t0), [output(1, 5)]);
        assert_eq!(c.take(output(2, 3), ms(1)), [output(2, 3)]);
        assert!(c.take(output(1, 9), ms(2)).is_empty());
        assert!(c.take(output(1, 12), ms(4)).is_empty());
        assert_eq!(c.due(), Some(ms(10)));
        assert!(c.flush(ms(9)).is_empty());
        assert_eq!(c.flush(ms(10)), [output(1, 12)]);
        assert_eq!(c.due(), None);
        assert!(c.take(output(1, 20), ms(15)).is_empty());
        let info = crate::kernel::jobs::JobInfo {
            id: JobId(1),
            command: "x".into(),
            pid: None,
            tty: false,
            state: crate::kernel::jobs::JobState::Exited,
            exit_code: Some(0),
            signal: None,
            bytes: 20,
            started_ms: 0,
            ended_ms: Some(1),
        };
        let end = JobEvent::Ended { info };
        assert_eq!(c.take(end.clone(), ms(16)), [output(1, 20), end]);
        assert_eq!(c.due(), None);
    }
}
