//! The trust store's decisions: hooks by hash, the allow rules and env by one hash, answers
//! remembered owner-only.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;

/// A temp `KEEL_HOME` and project; the project's `.keel/settings.json` is set by [`Fixture::set`].
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work/.keel")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Fixture { dir }
    }

    fn set(&self, v: Value) {
        std::fs::write(
            self.dir.path().join("work/.keel/settings.json"),
            v.to_string(),
        )
        .unwrap();
    }

    fn env(&self) -> Env {
        let vars = [(
            crate::settings::MANAGED_VAR.to_string(),
            self.dir.path().join("none.json").display().to_string(),
        )];
        crate::setup::open::env_in(
            &vars.into_iter().collect(),
            &self.dir.path().join("home"),
            self.dir.path(),
            &self.dir.path().join("work"),
            BTreeMap::new(),
        )
    }

    /// The settings of a session in the project (`trusted`: `--trust-project`).
    fn settings(&self, trusted: bool) -> Settings {
        let mut spec = crate::wire::protocol::spec::SessionSpec::new();
        spec.trust.project = trusted;
        Settings::resolve(&spec, crate::mode::Mode::Print, &self.env()).unwrap()
    }
}

/// A project holding one MCP server `srv` whose entry has the digest `digest`.
fn srv(digest: &str) -> Holdings {
    Holdings {
        servers: vec![("srv".into(), digest.into())],
        instructions: Vec::new(),
    }
}

fn hooks(cmd: &str) -> Value {
    json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": cmd}]}]})
}

#[test]
fn a_yes_trusts_the_current_content_and_a_change_is_asked_about_again() {
    let f = Fixture::new();
    f.set(json!({"hooks": hooks("a.sh"), "permissions": {"allow": ["Read"]}, "env": {"K": "1"}}));
    let (s, env) = (f.settings(false), f.env());
    let t = Trust::read(&s, &env);
    assert!(!t.hook_runs("PreToolUse", "Bash", "a.sh"));
    assert!(!t.settings_apply());
    assert_eq!(t.hook(&t.wants.hooks[0]), HookTrust::Untrusted);
    let q = question(&s, &env, Holdings::default()).unwrap();
    assert_eq!(
        (q.hooks.clone(), q.allow.clone(), q.env.clone()),
        (vec!["a.sh".into()], vec!["Read".into()], vec!["K".into()])
    );
    answer(&s, &env, &q, true).unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.keel_home.join(FILE))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let t = Trust::read(&s, &env);
    assert!(t.hook_runs("PreToolUse", "Bash", "a.sh"));
    assert!(t.settings_apply());
    assert!(t.warnings().is_empty(), "{:?}", t.warnings());
    assert!(question(&s, &env, Holdings::default()).is_none());
    // The same command under another matcher is another hook.
    assert!(!t.hook_runs("PreToolUse", "*", "a.sh"));

    // The hook changes; the rules and env do not: only the hook waits.
    f.set(json!({"hooks": hooks("b.sh"), "permissions": {"allow": ["Read"]}, "env": {"K": "1"}}));
    let s = f.settings(false);
    let t = Trust::read(&s, &env);
    assert_eq!(t.hook(&t.wants.hooks[0]), HookTrust::Changed);
    assert!(t.settings_apply());
    let w = t.warnings();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("its hooks `b.sh` (changed since trusted)"),
        "{w:?}"
    );
    assert!(!w[0].contains("allow rules"), "{w:?}");
    let q = question(&s, &env, Holdings::default()).unwrap();
    assert_eq!(q.hooks, ["b.sh (changed)"]);
    assert!(q.allow.is_empty() && q.env.is_empty());
    // An env value changes: the allow rules and env wait again.
    f.set(json!({"hooks": hooks("b.sh"), "permissions": {"allow": ["Read"]}, "env": {"K": "2"}}));
    assert!(!Trust::read(&f.settings(false), &env).settings_apply());
    // --trust-project trusts all of it for the run, and asks nothing.
    let s = f.settings(true);
    let t = Trust::read(&s, &env);
    assert!(t.hook_runs("PreToolUse", "Bash", "b.sh") && t.settings_apply());
    assert!(t.warnings().is_empty());
    assert!(question(&s, &env, Holdings::default()).is_none());
}

#[test]
fn a_no_is_not_asked_again_until_something_changes() {
    let f = Fixture::new();
    f.set(json!({"hooks": hooks("a.sh")}));
    let (s, env) = (f.settings(false), f.env());
    let q = question(&s, &env, srv("d1")).unwrap();
    answer(&s, &env, &q, false).unwrap();
    assert!(question(&s, &env, srv("d1")).is_none());
    assert!(!dir_trusted(&env.keel_home, &env.cwd));
    assert!(!Trust::read(&s, &env).hook_runs("PreToolUse", "Bash", "a.sh"));
    f.set(json!({"hooks": hooks("a2.sh")}));
    let s = f.settings(false);
    let q = question(&s, &env, srv("d1")).unwrap();
    // Something changed: what still waits is asked about, the server too.
    assert_eq!(q.servers, ["srv"]);
    assert_eq!(q.hooks, ["a2.sh"]);
    answer(&s, &env, &q, true).unwrap();
    assert!(dir_trusted(&env.keel_home, &env.cwd));
}

#[test]
fn user_level_settings_need_no_trust() {
    let f = Fixture::new();
    std::fs::write(
        f.dir.path().join("home/settings.json"),
        json!({"hooks": hooks("u.sh"), "permissions": {"allow": ["Read"]}, "env": {"U": "1"}})
            .to_string(),
    )
    .unwrap();
    let (s, env) = (f.settings(false), f.env());
    let t = Trust::read(&s, &env);
    assert!(t.wants.hooks.is_empty() && t.settings_apply());
    assert!(question(&s, &env, Holdings::default()).is_none());
    assert_eq!(s.env_vars(&t)["U"], "1");
}

#[test]
fn a_server_is_trusted_by_its_content_and_a_changed_or_new_one_is_asked_about() {
    let f = Fixture::new();
    let (s, env) = (f.settings(false), f.env());
    let q = question(&s, &env, srv("d1")).unwrap();
    assert_eq!(q.servers, ["srv"]);
    answer(&s, &env, &q, true).unwrap();
    assert!(question(&s, &env, srv("d1")).is_none());
    assert!(Trust::read(&s, &env).servers().allows("srv", "d1"));
    // A `git pull` changed its entry: it waits, and the question says so.
    assert!(!Trust::read(&s, &env).servers().allows("srv", "d2"));
    let q = question(&s, &env, srv("d2")).unwrap();
    assert_eq!(q.servers, ["srv (changed)"]);
    // A server added next to a trusted one waits too.
    let mut two = srv("d1");
    two.servers.push(("new".into(), "d3".into()));
    let q = question(&s, &env, two).unwrap();
    assert_eq!(q.servers, ["new"]);
    assert!(!Trust::read(&s, &env).servers().allows("new", "d3"));
    // `--trust-project` starts every one, records nothing.
    assert!(Trust::read(&f.settings(true), &env)
        .servers()
        .allows("new", "d3"));
}

#[test]
fn a_project_with_only_agents_is_asked_about_once() {
    let f = Fixture::new();
    let (s, env) = (f.settings(false), f.env());
    let holds = || Holdings {
        servers: Vec::new(),
        instructions: vec!["agent reviewer".into()],
    };
    let q = question(&s, &env, holds()).unwrap();
    assert_eq!(q.instructions, ["agent reviewer"]);
    answer(&s, &env, &q, false).unwrap();
    assert!(question(&s, &env, holds()).is_none());
    assert!(!dir_trusted(&env.keel_home, &env.cwd));
}

#[test]
fn a_session_in_a_subdirectory_has_the_trust_of_its_project() {
    let f = Fixture::new();
    let root = f.dir.path().join("work");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("crates/a")).unwrap();
    let (s, env) = (f.settings(false), f.env());
    let q = question(&s, &env, srv("d1")).unwrap();
    answer(&s, &env, &q, true).unwrap();
    let mut sub = env.clone();
    sub.cwd = root.join("crates/a");
    assert!(dir_trusted(&sub.keel_home, &sub.cwd));
    assert!(Trust::read(&s, &sub).servers().allows("srv", "d1"));
    // And the other way round: trusted from the subdirectory, the root has it too.
    let g = Fixture::new();
    let root = g.dir.path().join("work");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let mut sub = g.env();
    sub.cwd = root.join("sub");
    let s = g.settings(false);
    let q = question(&s, &sub, srv("d1")).unwrap();
    answer(&s, &sub, &q, true).unwrap();
    assert!(dir_trusted(&sub.keel_home, &root));
}

#[test]
fn a_projects_status_line_waits_for_trust() {
    let f = Fixture::new();
    f.set(json!({"statusLine": {"type": "command", "command": "./line.sh"}}));
    let (s, env) = (f.settings(false), f.env());
    let t = Trust::read(&s, &env);
    assert!(!t.settings_apply());
    assert!(
        t.warnings()[0].contains("its statusLine `./line.sh`"),
        "{:?}",
        t.warnings()
    );
    let q = question(&s, &env, Holdings::default()).unwrap();
    assert_eq!(q.status_line, ["./line.sh"]);
    answer(&s, &env, &q, true).unwrap();
    assert!(Trust::read(&s, &env).settings_apply());
    f.set(json!({"statusLine": {"type": "command", "command": "./other.sh"}}));
    assert!(!Trust::read(&f.settings(false), &env).settings_apply());
}
