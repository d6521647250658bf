//! The hostile suite, issue 43 point 12: credential variables of keel's environment never
//! reach the model's commands (AWS, GitHub, Azure, Google and the patterns `*_TOKEN`,
//! `*_SECRET*`, `*_PASSWORD`, `*_KEY`), unless `sandbox.passEnv` names them. Under both
//! mechanisms, as root and as `nobody`.

use serde_json::json;

use crate::sandbox::{bash, run_as, users_and_mechanisms, world_as, User};

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
