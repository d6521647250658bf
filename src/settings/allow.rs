//! Adding rules to a settings file's `permissions.allow` (an "always allow" answer saved to
//! `<project>/.keel/settings.local.json`): the file and its directory are made when missing,
//! an existing file keeps its other keys and their order, a rule already listed is not added
//! twice, and the new text replaces the old at once (a temp file renamed over it). A file that
//! is not a JSON object with an object `permissions` and a list `allow` is left alone.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Why rules could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowErrorKind {
    /// The file exists but cannot be read, or the new one cannot be written.
    Io,
    /// The file is not JSON, or not the shape settings have: it is not overwritten.
    Invalid,
}

/// Rules that could not be saved: what went wrong, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowError {
    pub kind: AllowErrorKind,
    pub message: String,
}

impl std::fmt::Display for AllowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `<project>/.keel/settings.local.json` of a session in `cwd`: where "always" answers go.
pub fn local_file(cwd: &Path) -> PathBuf {
    super::project_root(cwd)
        .join(".keel")
        .join("settings.local.json")
}

/// Adds `rules` to `permissions.allow` of the settings file at `path`; returns those that
/// were not listed yet (nothing is written when that is none).
pub fn add_allow(path: &Path, rules: &[String]) -> Result<Vec<String>, AllowError> {
    let err = |kind, why: String| AllowError {
        kind,
        message: format!("cannot add to {}: {why}", path.display()),
    };
    let mut doc = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str::<Value>(&text).map_err(|e| {
            err(
                AllowErrorKind::Invalid,
                format!("it is not valid JSON ({e})"),
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
        Err(e) => return Err(err(AllowErrorKind::Io, e.to_string())),
    };
    let allow = allow_list(&mut doc).map_err(|why| err(AllowErrorKind::Invalid, why.into()))?;
    let mut added = Vec::new();
    for rule in rules {
        let listed = allow.iter().any(|v| v.as_str() == Some(rule.as_str()));
        if !listed && !added.contains(rule) {
            allow.push(Value::String(rule.clone()));
            added.push(rule.clone());
        }
    }
    if added.is_empty() {
        return Ok(added);
    }
    let mut text = serde_json::to_string_pretty(&doc)
        .map_err(|e| err(AllowErrorKind::Invalid, e.to_string()))?;
    text.push('\n');
    replace(path, &text).map_err(|e| err(AllowErrorKind::Io, e.to_string()))?;
    Ok(added)
}

/// The `permissions.allow` list of a settings document, made when missing.
fn allow_list(doc: &mut Value) -> Result<&mut Vec<Value>, &'static str> {
    let root = doc.as_object_mut().ok_or("it is not a JSON object")?;
    let permissions = root
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or("its `permissions` is not an object")?;
    permissions
        .entry("allow")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or("its `permissions.allow` is not a list")
}

/// Writes `text` to a temp file beside `path` and renames it over `path`.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".settings.")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rules(r: &[&str]) -> Vec<String> {
        r.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_missing_file_and_directory_are_made() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(".keel/settings.local.json");
        let added = add_allow(&path, &rules(&["Bash(npm test:*)", "Bash(npm test:*)"])).unwrap();
        assert_eq!(added, ["Bash(npm test:*)"]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\n  \"permissions\": {\n    \"allow\": [\n      \"Bash(npm test:*)\"\n    ]\n  }\n}\n"
        );
    }

    #[test]
    fn an_existing_file_keeps_its_keys_in_order_and_gets_no_duplicate() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("settings.local.json");
        std::fs::write(
            &path,
            r#"{"model": "a/b", "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(ls:*)"]}, "env": {"X": "1"}}"#,
        )
        .unwrap();
        let added = add_allow(&path, &rules(&["Bash(ls:*)", "Edit(/src/a.rs)"])).unwrap();
        assert_eq!(added, ["Edit(/src/a.rs)"]);
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["model", "permissions", "env"]);
        assert_eq!(
            v["permissions"],
            serde_json::json!({"deny": ["Bash(rm:*)"], "allow": ["Bash(ls:*)", "Edit(/src/a.rs)"]})
        );
        let before = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            add_allow(&path, &rules(&["Bash(ls:*)"])).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            before,
            "nothing new: untouched"
        );
        let leftovers = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temp file is left behind");
    }

    #[test]
    fn an_invalid_file_is_not_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("settings.local.json");
        for bad in [
            "{\"model\": ",
            "[1]",
            "{\"permissions\": []}",
            "{\"permissions\": {\"allow\": \"x\"}}",
        ] {
            std::fs::write(&path, bad).unwrap();
            let e = add_allow(&path, &rules(&["Bash(ls:*)"])).unwrap_err();
            assert_eq!(e.kind, AllowErrorKind::Invalid, "{bad}");
            assert!(e.message.contains("settings.local.json"), "{}", e.message);
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad);
        }
    }
}
