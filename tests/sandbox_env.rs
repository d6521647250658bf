//! The hostile suite, issue 43 point 12: credential variables of keel's environment never
//! reach the model's commands (AWS, GitHub, Azure, Google and the patterns `*_TOKEN`,
//! `*_SECRET*`, `*_PASSWORD`, `*_KEY`), unless `sandbox.passEnv` names them. Under both
//! mechanisms, as root and as `nobody`.

use serde_json::json;

use crate::sandbox::{bash, keel_as, run_as, users_and_mechanisms, world_as, User};

const CREDENTIALS: [(&str, &str); 7] = [
    ("AWS_ACCESS_KEY_ID", "AKIA-canary-1"),
    ("AWS_SECRET_ACCESS_KEY", "canary-2"),
    ("GITHUB_TOKEN", "ghp_canary-3"),
    ("AZURE_CLIENT_SECRET", "canary-4"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/canary-5.json"),
    ("DB_PASSWORD", "canary-6"),
    ("STRIPE_SECRET_KEY", "canary-7"),
];

#[test]
fn credential_variables_do_not_reach_commands_unless_pass_env_names_them() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let settings = json!({"sandbox": {"passEnv": ["NPM_TOKEN"]}});
        std::fs::write(sb.home().join("settings.json"), settings.to_string()).unwrap();
        if user == User::Nobody {
            crate::sandbox::give_to_nobody(&sb.home());
        }
        let mut envs: Vec<(&str, &str)> = CREDENTIALS.to_vec();
        envs.push(("NPM_TOKEN", "passed-canary"));
        envs.push(("ORDINARY", "plain-value"));
        let (r, _) = run_as(&sb, user, mech, &[bash("env")], &envs, &[]);
        let who = format!("{mech} as {user:?}");
        let seen = &r[0].0;
        for (name, value) in CREDENTIALS {
            assert!(
                !seen.contains(value),
                "{who}: {name} reached the command:\n{seen}"
            );
        }
        assert!(seen.contains("NPM_TOKEN=passed-canary"), "{who}: {seen}");
        assert!(seen.contains("ORDINARY=plain-value"), "{who}: {seen}");
    }
}

/// Issue 43 point 13: with the workspace at `$HOME` (or holding it), what a login shell, git,
/// the user's `PATH` and the desktop read later stays read-only, whether or not it exists, and
/// every mode says the workspace holds the home directory.
#[test]
fn a_workspace_that_holds_home_keeps_shell_git_path_and_autostart_files() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let work = sb.work().display().to_string();
        std::fs::write(sb.work().join(".bashrc"), "# rc\n").unwrap();
        let calls = [bash(
            "echo evil >> .bashrc; echo '[core] pager = evil' > .gitconfig; \
             mkdir -p .local/bin && echo evil > .local/bin/ls; \
             mkdir -p .config/autostart && echo evil > .config/autostart/x.desktop; \
             mkdir -p .config/systemd/user && echo evil > .config/systemd/user/x.service; true",
        )];
        let envs = [("HOME", work.as_str())];
        let (_, stderr) = run_as(&sb, user, mech, &calls, &envs, &["--allow-home"]);
        let who = format!("{mech} as {user:?}");
        let w = sb.work();
        assert_eq!(
            std::fs::read_to_string(w.join(".bashrc")).unwrap(),
            "# rc\n",
            "{who}"
        );
        for p in [
            ".gitconfig",
            ".local/bin/ls",
            ".config/autostart/x.desktop",
            ".config/systemd/user/x.service",
        ] {
            assert!(!w.join(p).exists(), "{who}: {p} was written");
        }
        assert!(
            stderr.contains("holds the home directory"),
            "{who}: {stderr}"
        );
    }
}

/// Issue 43 point 13: a run nobody watches (print or JSON) in a directory that is the home
/// directory is refused before the model runs anything, unless `--allow-home` says so; the
/// error names the directory and the flag.
#[test]
fn an_unwatched_run_in_the_home_directory_is_refused_without_allow_home() {
    for (user, mech) in users_and_mechanisms() {
        let sb = world_as(user);
        let work = sb.work().display().to_string();
        let mut cmd = keel_as(&sb, user, mech, &[bash("touch ran")], &["-p"]);
        cmd.env("HOME", &work);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let who = format!("{mech} as {user:?}");
        assert_eq!(out.status.code(), Some(2), "{who}: {stderr}");
        assert!(
            stderr.contains("refusing to run unwatched"),
            "{who}: {stderr}"
        );
        assert!(stderr.contains("--allow-home"), "{who}: {stderr}");
        assert!(
            !sb.work().join("ran").exists(),
            "{who}: the model's command ran"
        );
    }
}
