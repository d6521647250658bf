//! Scheduled tasks (`keel schedule …`, run by the daemon): the task store
//! `$KEEL_HOME/schedules.json` (0600, written atomically under `schedules.lock`), the task and
//! its run state, and the parsing of `--every` durations and names. `due` decides when a task
//! runs (pure, over an injected time). A file format both sides read: the daemon's scheduler
//! (`daemon::scheduler`) runs the tasks, `keel schedule` (`cli::commands::schedule`) edits
//! them. The store never prints and never decides timing.

pub mod due;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::kernel::private;

/// The store's file name in `$KEEL_HOME`.
pub const FILE: &str = "schedules.json";
/// Taken (flock) around every read-modify-write of the store.
const LOCK: &str = "schedules.lock";
/// The format written; a file of another version is refused as corrupt, except version 1
/// (tasks with command-line `args`), which a store with a converter turns into this one.
const VERSION: u32 = 2;
/// The version whose tasks hold `args` instead of a spec.
const VERSION_ARGV: u32 = 1;

/// Turns a version-1 task's flags (and its directory) into a session spec: the command line's
/// parser, handed in by whoever opens the store (the store knows no command line).
pub type ArgvToSpec =
    fn(&[String], &Path) -> Result<crate::wire::protocol::spec::SessionSpec, ScheduleError>;
/// The shortest `--every` (seconds).
pub const MIN_EVERY_SECS: u64 = 60;
/// Test-only: a lower floor for `--every` (e.g. `1` lets an end-to-end test use `1s`).
pub const MIN_SECS_VAR: &str = "KEEL_SCHEDULE_MIN_SECS";
/// The longest task name.
pub const MAX_NAME: usize = 64;

/// One scheduled task: what runs, where, when, and how its last run went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Task {
    pub name: String,
    /// Seconds between runs (exactly one of `every` and `cron`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<u64>,
    /// A 5-field cron expression in the local zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// Absolute directory the run starts in.
    pub cwd: PathBuf,
    /// What the run's session is opened with (a fresh session of `cwd` unless it picks one).
    #[serde(default)]
    pub spec: crate::wire::protocol::spec::SessionSpec,
    /// The run's flags as a store of version 1 kept them: converted into `spec` once, when the
    /// store is loaded with a converter ([`Store::converting`]). Never written.
    #[serde(default, skip_serializing)]
    pub args: Vec<String>,
    pub prompt: String,
    /// The environment of the run (its tools get exactly it): the one `keel schedule add` ran
    /// in, less the provider keys and every variable holding a secret, which are never
    /// stored. Empty (a task added by an older keel): the daemon's.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// A shell command run (`sh -c`, in `cwd`) after a run whose outcome is not success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<String>,
    #[serde(default)]
    pub paused: bool,
    /// RFC 3339, when the task was added.
    pub created: String,
    #[serde(default)]
    pub state: TaskState,
}

/// How a task's runs went (written by the daemon).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskState {
    /// RFC 3339: when the last run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// `running` while it runs, then the outcome word of `src/exit.rs` (`success`, `failed`,
    /// `blocked`, `turn_limit`, `config_error`, `usage`, `interrupted`, `internal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default)]
    pub runs: u64,
    /// Slots that came due while the previous run was still going (skipped, not queued).
    #[serde(default)]
    pub skipped: u64,
    /// RFC 3339: when the last slot was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_at: Option<String>,
    /// The last run's startup warnings (the sandbox is off or unavailable, a project setting
    /// not applied, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_warnings: Vec<String>,
    /// What the sandbox stopped in the last run (`sandbox_violation`s, as a front end shows
    /// them: `sandbox stopped a command (outside writable roots): /usr/x`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub last_violations: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    tasks: Vec<Task>,
}

/// Why the store cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The file exists but is not a valid store: nothing is run from it, nothing overwrites it.
    Corrupt {
        path: PathBuf,
        why: String,
    },
    Io {
        path: PathBuf,
        why: String,
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Corrupt { path, why } => {
                write!(f, "the schedules file {} is corrupt: {why}", path.display())
            }
            StoreError::Io { path, why } => write!(f, "{}: {why}", path.display()),
        }
    }
}

/// What is wrong with a task's schedule (`--every`, `--cron`, or the store's `every`/`cron`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScheduleErrorKind {
    /// `--every` is not a positive number with s, m, h or d.
    Duration,
    /// `--every` is a duration too long to count in seconds.
    TooLong,
    /// `--cron` is not a 5-field cron expression.
    Cron,
    /// Not exactly one of `every` and `cron`, or `every` is 0 seconds.
    Shape,
    /// A version-1 task's flags do not parse.
    Flags,
}

/// A schedule that cannot be used: its kind and the sentence the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleError {
    pub kind: ScheduleErrorKind,
    pub message: String,
}

impl ScheduleError {
    pub fn new(kind: ScheduleErrorKind, message: impl Into<String>) -> Self {
        ScheduleError {
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScheduleError {}

/// `$KEEL_HOME/schedules.json`.
#[derive(Debug, Clone)]
pub struct Store {
    pub path: PathBuf,
    /// Converts a version-1 store (`None`: such a store is refused as corrupt).
    convert: Option<ArgvToSpec>,
}

impl Store {
    pub fn new(keel_home: &Path) -> Store {
        Store {
            path: keel_home.join(FILE),
            convert: None,
        }
    }

    /// This store, converting a version-1 file with `convert` when it is loaded: the old file
    /// is kept beside it (`schedules.json.v1.bak`) and the converted one written in its place.
    pub fn converting(mut self, convert: ArgvToSpec) -> Store {
        self.convert = Some(convert);
        self
    }

    /// The tasks (none when the file does not exist). A version-1 store is converted under
    /// the store's lock.
    pub fn load(&self) -> Result<Vec<Task>, StoreError> {
        match self.parsed()? {
            Some((tasks, VERSION)) => Ok(tasks),
            Some(_) => {
                let _lock = self.lock()?;
                self.load_locked()
            }
            None => Ok(Vec::new()),
        }
    }

    /// [`Store::load`] by a caller that holds the store's lock: a version-1 store is converted
    /// (a backup of the file beside it, the converted store written in its place, one line in
    /// the log).
    fn load_locked(&self) -> Result<Vec<Task>, StoreError> {
        let Some((mut tasks, version)) = self.parsed()? else {
            return Ok(Vec::new());
        };
        if version == VERSION {
            return Ok(tasks);
        }
        let Some(convert) = self.convert else {
            return Err(self.corrupt(format!(
                "version {VERSION_ARGV} (this keel reads version {VERSION})"
            )));
        };
        for t in &mut tasks {
            t.spec = convert(&t.args, &t.cwd).map_err(|e| {
                self.corrupt(format!("task {:?}: its flags: {}", t.name, e.message))
            })?;
            t.args.clear();
        }
        let backup = self.path.with_extension("json.v1.bak");
        let old = std::fs::read(&self.path).map_err(|e| self.io(&e))?;
        private::write_file(&backup, &old).map_err(|e| self.io(&e))?;
        self.save(&tasks)?;
        tracing::info!(
            "converted {} to version {VERSION} (session specs instead of flags); the old file \
             is kept as {}",
            self.path.display(),
            backup.display()
        );
        Ok(tasks)
    }

    /// The file's tasks and version (`None`: no file); version 1 only with a converter.
    fn parsed(&self) -> Result<Option<(Vec<Task>, u32)>, StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.io(&e)),
        };
        parse(&text, self.convert.is_some())
            .map(Some)
            .map_err(|why| self.corrupt(why))
    }

    fn corrupt(&self, why: String) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            why,
        }
    }

    /// Loads the tasks under the store's lock, lets `f` change them, and writes them back
    /// atomically if `f` succeeded. A corrupt file is never overwritten.
    pub fn update<R, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut Vec<Task>) -> Result<R, E>,
    ) -> Result<R, E> {
        let _lock = self.lock()?;
        let mut tasks = self.load_locked()?;
        let r = f(&mut tasks)?;
        self.save(&tasks)?;
        Ok(r)
    }

    /// Changes the state of task `name`, if it (still) exists; a corrupt or unreadable file
    /// is left alone (the error is returned).
    pub fn set_state(&self, name: &str, f: impl FnOnce(&mut TaskState)) -> Result<(), StoreError> {
        self.update(|tasks| {
            if let Some(t) = tasks.iter_mut().find(|t| t.name == name) {
                f(&mut t.state);
            }
            Ok::<_, StoreError>(())
        })
    }

    /// The file's modification stamp (to notice hand edits); `None` if it does not exist.
    pub fn stamp(&self) -> Option<(std::time::SystemTime, u64)> {
        let m = std::fs::metadata(&self.path).ok()?;
        Some((m.modified().ok()?, m.len()))
    }

    fn lock(&self) -> Result<std::fs::File, StoreError> {
        let dir = self.dir();
        private::create_dir_all(&dir).map_err(|e| self.io(&e))?;
        let path = dir.join(LOCK);
        let file = private::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| self.io(&e))?;
        file.lock().map_err(|e| self.io(&e))?;
        Ok(file)
    }

    /// Writes a temp file in the same directory (0600), syncs it, renames it over the store.
    fn save(&self, tasks: &[Task]) -> Result<(), StoreError> {
        let file = File {
            version: VERSION,
            tasks: tasks.to_vec(),
        };
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| self.io(&e))?;
        text.push('\n');
        let tmp = self
            .dir()
            .join(format!(".{FILE}.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = private::options()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            private::fix_mode(&f)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            private::sync_dir(&self.dir())
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            self.io(&e)
        })
    }

    fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."))
    }

    fn io(&self, e: &dyn std::fmt::Display) -> StoreError {
        StoreError::Io {
            path: self.path.clone(),
            why: e.to_string(),
        }
    }
}

/// The tasks of a store file's text and its version, every task checked (name, one schedule
/// that parses, an absolute cwd, unique names). Version 1 is read only when `v1` (its tasks
/// then still hold their `args`).
fn parse(text: &str, v1: bool) -> Result<(Vec<Task>, u32), String> {
    let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if file.version != VERSION && !(v1 && file.version == VERSION_ARGV) {
        return Err(format!(
            "version {} (this keel reads version {VERSION})",
            file.version
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for t in &file.tasks {
        let mut problems = name_problems(&t.name);
        if let Err(e) = due::Schedule::of(t) {
            problems.push(e.message);
        }
        if chrono::DateTime::parse_from_rfc3339(&t.created).is_err() {
            problems.push(format!("created {:?} is not an RFC 3339 time", t.created));
        }
        if !t.cwd.is_absolute() {
            problems.push(format!("cwd {} is not absolute", t.cwd.display()));
        }
        if !seen.insert(t.name.as_str()) {
            problems.push("the name is used twice".into());
        }
        if let Some(p) = problems.first() {
            return Err(format!("task {:?}: {p}", t.name));
        }
    }
    Ok((file.tasks, file.version))
}

/// What is wrong with a task name (empty: nothing).
pub fn name_problems(name: &str) -> Vec<String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let mut out = Vec::new();
    if name.is_empty() || name.len() > MAX_NAME {
        out.push(format!("a task name has 1 to {MAX_NAME} characters"));
    } else if !name.chars().all(ok_char) || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        out.push(format!(
            "task name {name:?}: use letters, digits, '-', '_' and '.', starting with a letter or digit"
        ));
    }
    out
}

/// `30s`, `30m`, `2h`, `1d` (a bare number is seconds) in seconds.
pub fn parse_every(text: &str) -> Result<u64, ScheduleError> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let factor = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => 0,
    };
    match digits.parse::<u64>() {
        Ok(n) if factor > 0 && n > 0 => n.checked_mul(factor).ok_or_else(|| {
            ScheduleError::new(
                ScheduleErrorKind::TooLong,
                format!("--every {text:?} is too long"),
            )
        }),
        _ => Err(ScheduleError::new(
            ScheduleErrorKind::Duration,
            format!(
                "--every {text:?} is not a duration: use a number and s, m, h or d (30s, 30m, 2h, 1d)"
            ),
        )),
    }
}

/// `3600` → `1h`, `90` → `90s`: the shortest exact spelling.
pub fn every_text(secs: u64) -> String {
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs.is_multiple_of(n) {
            return format!("{}{unit}", secs / n);
        }
    }
    format!("{secs}s")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn task(name: &str) -> Task {
        Task {
            name: name.into(),
            every: Some(60),
            cron: None,
            cwd: "/tmp".into(),
            spec: crate::wire::protocol::spec::SessionSpec {
                provider: Some("scripted".into()),
                ..Default::default()
            },
            args: Vec::new(),
            prompt: "hi".into(),
            env: Default::default(),
            on_failure: None,
            paused: false,
            created: "2026-01-01T00:00:00+00:00".into(),
            state: TaskState::default(),
        }
    }

    #[test]
    fn durations_parse_with_units_and_bad_ones_are_named() {
        assert_eq!(parse_every("30s"), Ok(30));
        assert_eq!(parse_every("30m"), Ok(1800));
        assert_eq!(parse_every("2h"), Ok(7200));
        assert_eq!(parse_every("1d"), Ok(86_400));
        assert_eq!(parse_every("45"), Ok(45));
        for bad in ["", "0m", "m", "5w", "-5m", "1.5h"] {
            let e = parse_every(bad).unwrap_err();
            assert!(e.message.contains("not a duration"), "{bad}: {e}");
            assert_eq!(e.kind, ScheduleErrorKind::Duration, "{bad}");
        }
        let e = parse_every("300000000000000000d").unwrap_err();
        assert_eq!(e.kind, ScheduleErrorKind::TooLong, "{e}");
        assert_eq!(every_text(1800), "30m");
        assert_eq!(every_text(90), "90s");
        assert_eq!(every_text(86_400 * 2), "2d");
    }

    #[test]
    fn names_are_checked() {
        assert!(name_problems("ci-nightly_2.x").is_empty());
        assert_eq!(name_problems("").len(), 1);
        assert_eq!(name_problems("-x").len(), 1);
        assert_eq!(name_problems("a b").len(), 1);
        assert_eq!(name_problems(&"a".repeat(65)).len(), 1);
    }

    #[test]
    fn the_store_round_trips_privately_and_atomically() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        assert_eq!(store.load().unwrap(), Vec::new(), "no file: no tasks");
        store
            .update(|t| {
                t.push(task("a"));
                Ok::<_, StoreError>(())
            })
            .unwrap();
        store.set_state("a", |s| s.runs = 3).unwrap();
        let tasks = store.load().unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].state.runs, 3);
        let mode = std::fs::metadata(&store.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "temp files left: {left:?}");
    }

    #[test]
    fn a_corrupt_store_is_reported_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        std::fs::write(&store.path, "{\"version\":1,\"tasks\":[{\"name\":").unwrap();
        let e = store.load().unwrap_err();
        assert!(
            matches!(&e, StoreError::Corrupt { .. }) && e.to_string().contains("schedules.json"),
            "{e}"
        );
        let r = store.update(|t| {
            t.push(task("b"));
            Ok::<_, StoreError>(())
        });
        assert!(r.is_err());
        let text = std::fs::read_to_string(&store.path).unwrap();
        assert_eq!(
            text, "{\"version\":1,\"tasks\":[{\"name\":",
            "left as it was"
        );
        // A file that parses but holds a bad task is corrupt too, naming the task.
        let mut bad = task("c");
        bad.cron = Some("61 * * * *".into());
        bad.every = None;
        let text = serde_json::to_string(&File {
            version: VERSION,
            tasks: vec![bad],
        })
        .unwrap();
        std::fs::write(&store.path, text).unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(e.contains("task \"c\""), "{e}");
    }

    /// A stand-in for the command line's parser: `--model M` and nothing else.
    fn model_flag(
        args: &[String],
        _cwd: &Path,
    ) -> Result<crate::wire::protocol::spec::SessionSpec, ScheduleError> {
        match args {
            [flag, model] if flag == "--model" => Ok(crate::wire::protocol::spec::SessionSpec {
                model: Some(model.clone()),
                ..Default::default()
            }),
            _ => Err(ScheduleError::new(
                ScheduleErrorKind::Flags,
                "not --model M",
            )),
        }
    }

    #[test]
    fn a_version_1_store_is_converted_once_with_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let v1 = r#"{"version":1,"tasks":[{"name":"a","every":60,"cwd":"/tmp","args":["--model","m"],"prompt":"p","created":"2026-01-01T00:00:00+00:00"}]}"#;
        std::fs::write(&path, v1).unwrap();
        // Without a converter it is refused, and left alone.
        let e = Store::new(dir.path()).load().unwrap_err().to_string();
        assert!(e.contains("version 1 (this keel reads version 2)"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), v1);
        let store = Store::new(dir.path()).converting(model_flag);
        let tasks = store.load().unwrap();
        assert_eq!(tasks[0].spec.model.as_deref(), Some("m"));
        assert!(tasks[0].args.is_empty());
        let backup = dir.path().join("schedules.json.v1.bak");
        assert_eq!(std::fs::read_to_string(&backup).unwrap(), v1);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&backup).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the backup is owner-only, as the store");
        let now = std::fs::read_to_string(&path).unwrap();
        assert!(
            now.contains("\"version\": 2") && now.contains("\"spec\""),
            "{now}"
        );
        assert!(!now.contains("\"args\""), "{now}");
        // Converted once: the next load reads version 2 as it is.
        assert_eq!(Store::new(dir.path()).load().unwrap(), tasks);
        // A change made first (under the store's lock) converts it too, without waiting on
        // that lock again.
        std::fs::write(&path, v1).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let again = store.clone();
        std::thread::spawn(move || {
            let r = again.update(|t| {
                t[0].paused = true;
                Ok::<_, StoreError>(())
            });
            let _ = tx.send(r);
        });
        let updated = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert!(
            matches!(updated, Ok(Ok(()))),
            "update of a version-1 store: {updated:?}"
        );
        let now = Store::new(dir.path()).load().unwrap();
        assert!(now[0].paused && now[0].spec.model.as_deref() == Some("m"));
        // Flags that do not convert leave the store corrupt, never rewritten.
        let bad = v1.replace("--model", "--nope");
        std::fs::write(&path, &bad).unwrap();
        let e = store.load().unwrap_err().to_string();
        assert!(e.contains("task \"a\": its flags: not --model M"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
    }
}
