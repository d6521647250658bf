//! Which environment variables are credentials, by name (issue 43, point 12): what no tool
//! process sees and no scheduled task stores, unless the settings' `sandbox.passEnv` names
//! it. The cloud providers' and forges' own names, and the patterns `*_TOKEN`, `*_SECRET*`,
//! `*_PASSWORD`, `*_KEY` (case-insensitive). Owns only the judgement; [`super::ToolEnv`]
//! scrubs.

/// Names that are credentials without matching a pattern.
const NAMED: [&str; 14] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_FEDERATED_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_GHA_CREDS_PATH",
    "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "VAULT_TOKEN",
    "NPM_CONFIG__AUTH",
    "DOCKER_AUTH_CONFIG",
];

/// Whether the variable `name` holds a credential.
pub fn is_credential(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    NAMED.contains(&up.as_str())
        || up.ends_with("_TOKEN")
        || up.contains("_SECRET")
        || up.ends_with("_PASSWORD")
        || up.ends_with("_KEY")
        || up.ends_with("_CREDENTIALS")
        || up.starts_with("AWS_SECRET")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clouds_forges_and_patterns_are_credentials_and_ordinary_variables_are_not() {
        for name in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "AZURE_CLIENT_SECRET",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "npm_token",
            "DB_PASSWORD",
            "STRIPE_SECRET_KEY",
            "MY_API_KEY",
            "VAULT_TOKEN",
        ] {
            assert!(is_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "AWS_REGION",
            "TOKENIZER",
            "KEYBOARD",
            "TERM",
            "SSH_AUTH_SOCK",
        ] {
            assert!(!is_credential(name), "{name}");
        }
    }
}
