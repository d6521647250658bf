//! `ToolEnv`: the environment the processes keel's tools start get (this process's, or the
//! session's own in the daemon, minus provider credentials), where full outputs go (a saved
//! session's kept directory, else the spill directory) and what they leave behind (the
//! private spill directory, the process groups of background children), cleaned up when the
//! last clone is dropped; and the session's background jobs' table, when it has one. Owns
//! only that; it never reads the process environment (the caller hands it the names to remove
//! and the session's variables).

use std::collections::BTreeMap;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::kernel::jobs::{JobId, JobLimits, Jobs};
use crate::kernel::provider::model::Registry;

/// The environment and leftovers of tool processes (`bash`, the user's `!cmd`). Clones share
/// the leftovers: the spill directory is removed and every remembered process group is killed
/// when the last clone is dropped (when the session ends).
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// Names of environment variables removed from every tool process.
    pub scrub_env: Vec<String>,
    /// The session's environment, when it is not this process's (a daemon session: the
    /// opening client's): tool processes get exactly it, less `scrub_env`. `None`: they
    /// inherit this process's environment, less `scrub_env`.
    vars: Option<Arc<BTreeMap<String, String>>>,
    /// The saved session's directory for full outputs (`<session file>.output`), kept after
    /// the session ends; `None` (no session file): they go to the spill directory.
    kept: Option<PathBuf>,
    leftovers: Arc<Leftovers>,
    /// The session's background jobs: shared by the clones of one session, its own for each
    /// session ([`ToolEnv::with_jobs`]).
    jobs: Arc<JobSlot>,
}

/// A session's job table (made on first use unless given) and where the model read each
/// job's output up to (`bash_output`).
#[derive(Debug, Default)]
struct JobSlot {
    table: Mutex<Option<Jobs>>,
    read_to: Mutex<std::collections::HashMap<JobId, u64>>,
    /// Jobs whose end the model read in a tool's result (no notice of it then).
    told: Mutex<std::collections::HashSet<JobId>>,
}

impl Default for ToolEnv {
    /// Scrubs the key variables of the built-in providers (`OPENAI_API_KEY`, ...).
    fn default() -> Self {
        ToolEnv::for_providers(&Registry::builtin(), &[], &BTreeMap::new())
    }
}

impl ToolEnv {
    /// Scrubs exactly `scrub_env`.
    pub fn new(scrub_env: Vec<String>) -> Self {
        ToolEnv {
            scrub_env,
            vars: None,
            kept: None,
            leftovers: Arc::new(Leftovers::default()),
            jobs: Arc::default(),
        }
    }

    /// A session of its own: its background jobs are `jobs` (see [`crate::kernel::jobs`]),
    /// shared by the clones made from this one and no other, instead of a table made on first
    /// use (see [`ToolEnv::jobs`]).
    pub fn with_jobs(mut self, jobs: Jobs) -> Self {
        self.jobs = Arc::new(JobSlot {
            table: Mutex::new(Some(jobs)),
            read_to: Mutex::default(),
            told: Mutex::default(),
        });
        self
    }

    /// Tool processes start from `vars` (less the scrubbed variables) instead of inheriting
    /// this process's environment; `None` keeps inheriting.
    pub fn with_vars(mut self, vars: Option<BTreeMap<String, String>>) -> Self {
        self.vars = vars.map(Arc::new);
        self
    }

    /// Full outputs of this clone's tools are kept in `dir` (a saved session's own directory,
    /// see [`output_dir_of`]) instead of the spill directory removed at exit.
    pub fn keeping_outputs_in(mut self, dir: PathBuf) -> Self {
        self.kept = Some(dir);
        self
    }

    /// The directory full outputs are kept in, when it outlives the session.
    pub fn kept_output_dir(&self) -> Option<&Path> {
        self.kept.as_deref()
    }

    /// Where a cut tool output's full text is written: the session's kept directory (created
    /// 0700 now), else the spill directory under `root`.
    pub(crate) fn output_dir(&self, root: &Path) -> std::io::Result<PathBuf> {
        let Some(dir) = &self.kept else {
            return self.spill_dir(root);
        };
        if !dir.is_dir() {
            crate::kernel::private::create_dir_all(dir)?;
            lock(&self.leftovers.kept).push(dir.clone());
        }
        Ok(dir.clone())
    }

    /// `vars` without the variables this scrubs: what may be kept, e.g. in a scheduled task.
    pub fn visible(&self, vars: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        vars.iter()
            .filter(|(k, _)| !self.scrub_env.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// [`ToolEnv::for_credentials`] passing none of them.
    pub fn for_providers(
        registry: &Registry,
        secret_values: &[String],
        vars: &BTreeMap<String, String>,
    ) -> Self {
        ToolEnv::for_credentials(registry, secret_values, vars, &[])
    }

    /// Scrubs every provider's key variable (built in and models.json `apiKeyEnv`), every
    /// variable of `vars` whose value is a secret (one of `secret_values` (`--api-key`), a
    /// models.json literal key, or the value of a key variable), and every variable of `vars`
    /// that is a credential by its name ([`super::credentials`]) unless `pass` names it
    /// (`sandbox.passEnv`).
    pub fn for_credentials(
        registry: &Registry,
        secret_values: &[String],
        vars: &BTreeMap<String, String>,
        pass: &[String],
    ) -> Self {
        let mut names: Vec<String> = registry
            .providers
            .iter()
            .flat_map(|p| p.key_env.iter().chain(&p.key_env_alt).cloned())
            .collect();
        let mut secrets: Vec<&str> = secret_values.iter().map(String::as_str).collect();
        secrets.extend(registry.providers.iter().filter_map(|p| p.key.as_deref()));
        secrets.extend(names.iter().filter_map(|n| vars.get(n)).map(String::as_str));
        secrets.retain(|s| !s.is_empty());
        names.extend(
            vars.iter()
                .filter(|(_, v)| secrets.contains(&v.as_str()))
                .map(|(k, _)| k.clone()),
        );
        names.extend(
            vars.keys()
                .filter(|k| super::credentials::is_credential(k) && !pass.contains(k))
                .cloned(),
        );
        names.sort();
        names.dedup();
        ToolEnv::new(names)
    }

    /// Gives a command about to be spawned the session's environment (when it has its own)
    /// and removes the scrubbed variables.
    pub(crate) fn apply(&self, cmd: &mut tokio::process::Command) {
        if let Some(vars) = &self.vars {
            cmd.env_clear().envs(vars.iter());
        }
        for name in &self.scrub_env {
            cmd.env_remove(name);
        }
    }

    /// The whole environment a process spawned with [`ToolEnv::apply`] gets: the session's,
    /// or what this process's children inherit, less the scrubbed variables (for a process
    /// started elsewhere: the sandbox's zygote).
    pub(crate) fn resolved(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let scrubbed = |k: &std::ffi::OsStr| self.scrub_env.iter().any(|n| k == n.as_str());
        match &self.vars {
            Some(vars) => vars
                .iter()
                .filter(|(k, _)| !scrubbed(k.as_ref()))
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            None => std::env::vars_os().filter(|(k, _)| !scrubbed(k)).collect(),
        }
    }

    /// Where the session's spill directory is (or will be) under `root`, without creating it:
    /// `<pid>-<random>`, chosen on the first call (the sandbox's policy names it before any
    /// tool needs it; a run whose tools spill nothing creates nothing).
    pub(crate) fn spill_path(&self, root: &Path) -> PathBuf {
        let mut spill = lock(&self.leftovers.spill);
        spill
            .get_or_insert_with(|| Spill {
                path: root.join(format!(
                    "{}-{}",
                    std::process::id(),
                    &uuid::Uuid::new_v4().simple().to_string()[..12]
                )),
                made: false,
            })
            .path
            .clone()
    }

    /// The session's private (0700) directory for full outputs (and the sandbox's `/tmp`),
    /// created under `root` on first use, at [`ToolEnv::spill_path`]. Creating it also removes
    /// directories left there by keel processes that no longer exist (killed with SIGKILL, so
    /// nothing cleaned up after them).
    pub(crate) fn spill_dir(&self, root: &Path) -> std::io::Result<PathBuf> {
        let path = self.spill_path(root);
        let mut spill = lock(&self.leftovers.spill);
        let Some(spill) = spill.as_mut() else {
            return Err(std::io::Error::other("the spill directory was not chosen"));
        };
        if spill.made {
            return Ok(path);
        }
        // `$KEEL_HOME/tmp` (and `$KEEL_HOME`, if new) are as private as the spill itself.
        crate::kernel::private::create_dir_all(root)?;
        remove_stale(root);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?,
            // Made by the sandbox's probe (`kernel::sandbox`): ours if it is a directory.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !std::fs::symlink_metadata(&path)?.is_dir() {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
        spill.made = true;
        Ok(path)
    }

    /// The session's job table, made on first use in the session's kept output directory
    /// (it outlives a crash there, so the next start ends what the crash left), else in its
    /// spill directory under `root`.
    pub fn jobs(&self, root: &Path) -> std::io::Result<Jobs> {
        let mut jobs = lock(&self.jobs.table);
        if let Some(j) = jobs.as_ref() {
            return Ok(j.clone());
        }
        let dir = self.output_dir(root)?;
        let made = Jobs::new(dir, JobLimits::default());
        *jobs = Some(made.clone());
        Ok(made)
    }

    /// The session's job table, if it has one yet.
    pub fn started_jobs(&self) -> Option<Jobs> {
        lock(&self.jobs.table).clone()
    }

    /// Where the model read job `id`'s output up to (0: nothing yet).
    pub(crate) fn read_to(&self, id: JobId) -> u64 {
        lock(&self.jobs.read_to).get(&id).copied().unwrap_or(0)
    }

    /// The model read job `id`'s end in a tool's result.
    pub(crate) fn mark_told(&self, id: JobId) {
        lock(&self.jobs.told).insert(id);
    }

    /// Whether the model read job `id`'s end in a tool's result.
    pub(crate) fn was_told(&self, id: JobId) -> bool {
        lock(&self.jobs.told).contains(&id)
    }

    /// The model read job `id`'s output up to `next`.
    pub(crate) fn set_read_to(&self, id: JobId, next: u64) {
        lock(&self.jobs.read_to).insert(id, next);
    }

    /// Remembers a tool process group: whatever of it still runs when the session ends is
    /// killed then. Groups that are already gone are forgotten here.
    pub(crate) fn adopt_group(&self, pgid: i32) {
        let mut groups = lock(&self.leftovers.groups);
        groups.retain(|&pg| killpg(Pid::from_raw(pg), None).is_ok());
        if !groups.contains(&pgid) {
            groups.push(pgid);
        }
    }
}

/// The directory a saved session's full outputs are kept in: `<file without .jsonl>.output`
/// beside the session file.
pub fn output_dir_of(session_file: &Path) -> PathBuf {
    session_file.with_extension("output")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What tool processes leave behind, shared by every clone of a [`ToolEnv`].
#[derive(Debug, Default)]
struct Leftovers {
    spill: Mutex<Option<Spill>>,
    /// Kept output directories created here: removed at the end when still empty.
    kept: Mutex<Vec<PathBuf>>,
    groups: Mutex<Vec<i32>>,
}

/// The session's spill directory: its path, and whether it was created.
#[derive(Debug)]
struct Spill {
    path: PathBuf,
    made: bool,
}

impl Drop for Leftovers {
    /// Kills the remembered process groups, then removes the spill directory (whoever made
    /// it: this process's name, never another's) and the kept output directories nothing was
    /// written to.
    fn drop(&mut self) {
        for dir in lock(&self.kept).iter() {
            // Fails, as it should, when the directory holds an output.
            let _ = std::fs::remove_dir(dir);
        }
        for &pg in lock(&self.groups).iter() {
            if let Err(e) = killpg(Pid::from_raw(pg), Signal::SIGKILL) {
                if e != Errno::ESRCH {
                    tracing::debug!(pgid = pg, error = %e, "tool env: killing a leftover group failed");
                }
            }
        }
        if let Some(spill) = lock(&self.spill).as_ref() {
            match std::fs::remove_dir_all(&spill.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    tracing::debug!(path = %spill.path.display(), error = %e, "tool env: the spill directory stays");
                }
                _ => {}
            }
        }
    }
}

/// Removes `<pid>-*` directories of `root` whose keel process no longer exists.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let me = std::process::id();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let dead =
            i32::try_from(pid).is_ok_and(|p| kill(Pid::from_raw(p), None) == Err(Errno::ESRCH));
        if pid != me && dead && entry.file_type().is_ok_and(|t| t.is_dir()) {
            if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                tracing::debug!(path = %entry.path().display(), error = %e, "tool env: stale dir stays");
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::provider::model::Registry;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn scrubs_key_names_and_variables_holding_a_secret() {
        let mut registry = Registry::builtin();
        registry
            .merge_file(
                r#"{"providers":{"local":{"baseUrl":"http://x/v1","apiKeyEnv":"LOCAL_KEY",
                   "apiKey":"lit","models":[{"id":"m"}]}}}"#,
            )
            .unwrap();
        let v = vars(&[
            ("OPENAI_API_KEY", "sk-1"),
            ("ALIAS", "sk-1"),
            ("FLAG_COPY", "flag"),
            ("LIT_COPY", "lit"),
            ("PATH", "/bin"),
            ("EMPTY_MATCH", ""),
        ]);
        let env = ToolEnv::for_providers(&registry, &["flag".into(), String::new()], &v);
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "DEEPSEEK_API_KEY",
            "OPENROUTER_API_KEY",
            "GROQ_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "LOCAL_KEY",
            "ALIAS",
            "FLAG_COPY",
            "LIT_COPY",
        ] {
            assert!(env.scrub_env.iter().any(|n| n == name), "{name}");
        }
        assert!(!env.scrub_env.iter().any(|n| n == "PATH"));
        assert!(!env.scrub_env.iter().any(|n| n == "EMPTY_MATCH"));
    }

    #[test]
    fn a_session_environment_is_kept_and_given_to_tools_without_its_secrets() {
        let v = vars(&[
            ("OPENAI_API_KEY", "sk-1"),
            ("ALIAS", "sk-1"),
            ("PATH", "/c"),
        ]);
        let env = ToolEnv::for_providers(&Registry::builtin(), &[], &v);
        assert_eq!(env.visible(&v), vars(&[("PATH", "/c")]));
        let mut cmd = tokio::process::Command::new("true");
        env.with_vars(Some(v)).apply(&mut cmd);
        let set: Vec<_> = cmd
            .as_std()
            .get_envs()
            .filter(|(_, v)| v.is_some())
            .map(|(k, _)| k.to_string_lossy().to_string())
            .collect();
        assert_eq!(set, ["PATH"]);
    }

    #[test]
    fn spill_dir_is_private_created_once_and_removed_with_the_last_clone() {
        let root = tempfile::tempdir().unwrap();
        let env = ToolEnv::default();
        let dir = env.spill_dir(root.path()).unwrap();
        assert!(dir.starts_with(root.path()));
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let clone = env.clone();
        assert_eq!(clone.spill_dir(root.path()).unwrap(), dir);
        drop(env);
        assert!(dir.exists(), "a clone still holds it");
        drop(clone);
        assert!(!dir.exists());
    }

    #[test]
    fn kept_outputs_outlive_the_env_and_an_empty_kept_dir_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let session = root.path().join("s").join("2026_x.jsonl");
        let kept = output_dir_of(&session);
        assert_eq!(kept, root.path().join("s").join("2026_x.output"));
        let env = ToolEnv::default().keeping_outputs_in(kept.clone());
        assert_eq!(env.output_dir(&root.path().join("tmp")).unwrap(), kept);
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::write(kept.join("bash-1.log"), "x").unwrap();
        drop(env);
        assert!(kept.join("bash-1.log").exists(), "kept with the session");
        let empty = root.path().join("s").join("2026_y.output");
        let env = ToolEnv::default().keeping_outputs_in(empty.clone());
        env.output_dir(root.path()).unwrap();
        drop(env);
        assert!(!empty.exists(), "nothing was kept in it");
    }

    #[test]
    fn the_spill_path_is_named_before_it_is_made_and_removed_whoever_made_it() {
        let root = tempfile::tempdir().unwrap();
        let env = ToolEnv::default();
        let path = env.spill_path(root.path());
        assert_eq!(env.spill_path(root.path()), path);
        assert!(!path.exists(), "named, not made");
        // Made by someone else first (the sandbox's probe), then taken as is.
        std::fs::create_dir(&path).unwrap();
        assert_eq!(env.spill_dir(root.path()).unwrap(), path);
        drop(env);
        assert!(!path.exists());
    }

    #[test]
    fn stale_dirs_of_dead_processes_are_removed() {
        let root = tempfile::tempdir().unwrap();
        // Above any pid_max: no such process.
        let stale = root.path().join("99999999-abc");
        std::fs::create_dir_all(stale.join("inner")).unwrap();
        let mine = root.path().join(format!("{}-other", std::process::id()));
        std::fs::create_dir(&mine).unwrap();
        let unrelated = root.path().join("notes");
        std::fs::create_dir(&unrelated).unwrap();
        let env = ToolEnv::default();
        env.spill_dir(root.path()).unwrap();
        assert!(!stale.exists());
        assert!(mine.exists() && unrelated.exists());
    }
}
