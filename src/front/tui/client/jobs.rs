//! `/jobs` in the controller: the session's jobs from `get_jobs` (at the start, so the status
//! line counts the running ones, and each time the panel opens), their output from
//! `read_job` and a kill with `kill_job` — pi commands on the session's link, in-process or
//! through the daemon, answered in the background.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use super::{Back, Client};
use crate::front::tui::transcript::HistoryCell;
use crate::kernel::jobs::JobId;
use crate::wire::pi::data::{JobData, JobReadData, JobsData};
use crate::wire::pi::Command;

/// Answers for the jobs panel.
pub(in crate::front::tui) enum JobsBack {
    /// `get_jobs`' list; `show`: the user asked (`/jobs`), not the start.
    Listed(JobsData, bool),
    Read(Result<JobReadData, String>),
    Killed(Result<JobData, String>),
}

impl Client {
    /// Asks for the session's jobs; `show`: open the panel (or print them) when they come.
    pub(in crate::front::tui) fn fetch_jobs(&self, show: bool) {
        self.in_back(move |commands| async move {
            match commands.ask::<JobsData>(&Command::GetJobs {}).await {
                Ok(list) => Some(Back::Jobs(JobsBack::Listed(list, show))),
                Err(e) if show => Some(Back::Notice(HistoryCell::Error(format!(
                    "cannot list the background jobs: {}",
                    e.message
                )))),
                // A host without jobs (an older daemon): nothing to count.
                Err(e) => {
                    tracing::info!("cannot list the background jobs: {e}");
                    None
                }
            }
        });
    }

    /// Reads job `id`'s output from `since` for the tail.
    pub(super) fn read_job(&self, id: JobId, since: u64) {
        self.in_back(move |commands| async move {
            let read = Command::ReadJob {
                job_id: id,
                since: Some(since),
                max: None,
            };
            let got = commands.ask::<JobReadData>(&read).await;
            Some(Back::Jobs(JobsBack::Read(got.map_err(|e| e.message))))
        });
    }

    /// Kills job `id`; the panel's list says `killed` when its `job_ended` comes.
    pub(super) fn kill_job(&self, id: JobId) {
        self.in_back(move |commands| async move {
            let kill = Command::KillJob { job_id: id };
            let got = commands.ask::<JobData>(&kill).await;
            Some(Back::Jobs(JobsBack::Killed(got.map_err(|e| e.message))))
        });
    }

    pub(super) fn on_jobs(&mut self, back: JobsBack) {
        match back {
            JobsBack::Listed(list, show) => {
                if show && self.plain {
                    let text = crate::front::tui::jobs::plain_list(&list.jobs);
                    self.view.notice(HistoryCell::Notice(text));
                }
                self.view.jobs.listed(list.jobs);
            }
            JobsBack::Read(read) => {
                if let Some((id, since)) = self.view.jobs.on_read(read) {
                    self.read_job(id, since);
                }
            }
            JobsBack::Killed(Ok(done)) => {
                let ended = crate::wire::events::WireEvent::JobEnded {
                    job: std::borrow::Cow::Owned(done.job),
                };
                if let Some((id, since)) = self.view.jobs.on_event(&ended) {
                    self.read_job(id, since);
                }
            }
            JobsBack::Killed(Err(why)) => self.view.jobs.kill_failed(why),
        }
    }

    /// `/jobs`: the panel at once with what the view knows, refreshed by `get_jobs`.
    pub(in crate::front::tui) fn open_jobs(&mut self) {
        if !self.plain {
            self.view.jobs.open();
        }
        self.fetch_jobs(true);
    }
}
