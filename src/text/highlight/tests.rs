//! Unit tests of the highlighter: classes per language, text kept intact, state across lines.

use super::*;

/// The text of each run with the class of that run, for the runs that have a class.
fn classed(runs: &Runs) -> Vec<(Class, &str)> {
    runs.iter()
        .filter(|(c, _)| *c != Class::Plain)
        .map(|(c, t)| (*c, t.trim()))
        .collect()
}

fn joined(runs: &Runs) -> String {
    runs.iter().map(|(_, t)| t.as_str()).collect()
}

fn class_of(runs: &Runs, piece: &str) -> Class {
    runs.iter()
        .find(|(_, t)| t.trim() == piece)
        .map(|(c, _)| *c)
        .unwrap_or_else(|| panic!("no run {piece:?} in {runs:?}"))
}

#[test]
fn rust_keywords_strings_comments_and_types_get_classes_and_the_text_is_intact() {
    let code =
        "// say hi\nfn main() {\n    let s: String = \"hi\".into(); // tail\n    let n = 42u8;\n}";
    let lines = highlight("rust", code).expect("rust has a grammar");
    assert_eq!(lines.len(), 5);
    for (runs, src) in lines.iter().zip(code.lines()) {
        assert_eq!(joined(runs), src, "text must be kept exactly");
    }
    assert_eq!(class_of(&lines[0], "// say hi"), Class::Comment);
    assert_eq!(class_of(&lines[1], "fn"), Class::Keyword);
    assert_eq!(class_of(&lines[1], "main"), Class::Function);
    assert_eq!(class_of(&lines[2], "let"), Class::Keyword);
    assert_eq!(class_of(&lines[2], "\"hi\""), Class::String);
    assert_eq!(class_of(&lines[2], "// tail"), Class::Comment);
    assert_eq!(class_of(&lines[2], "String"), Class::Type);
    assert!(classed(&lines[3]).iter().any(|(c, _)| *c == Class::Number));
}

#[test]
fn a_block_comment_carries_across_lines() {
    let lines = highlight("c", "/* one\n two */ int x;").unwrap();
    assert_eq!(class_of(&lines[1], "two */"), Class::Comment);
    assert_eq!(class_of(&lines[1], "int"), Class::Type);
}

#[test]
fn aliases_and_info_string_forms_pick_the_language() {
    for info in [
        "rust",
        "rs",
        "Rust",
        "{.rust}",
        "rust,ignore",
        "rust title=x",
        "python",
        "py",
        "js",
        "ts",
        "typescript",
        "json",
        "yaml",
        "yml",
        "bash",
        "sh",
        "diff",
        "go",
        "c",
        "cpp",
        "java",
        "html",
        "toml",
    ] {
        assert!(
            Highlighter::for_info(info).is_some(),
            "{info} has no grammar"
        );
    }
    for info in ["", "   ", "text", "txt", "no-such-language", "{}"] {
        assert!(
            Highlighter::for_info(info).is_none(),
            "{info:?} should be plain"
        );
    }
}

#[test]
fn diff_lines_are_inserted_deleted_and_meta() {
    let lines = highlight("diff", "@@ -1 +1 @@\n-old\n+new\n same").unwrap();
    assert_eq!(lines[0][0].0, Class::Meta);
    assert_eq!(class_of(&lines[1], "-old"), Class::Deleted);
    assert_eq!(class_of(&lines[2], "+new"), Class::Inserted);
}

#[test]
fn json_keys_are_attributes_and_values_strings_numbers_constants() {
    let lines = highlight("json", "{\"name\": \"keel\", \"n\": 3, \"ok\": true}").unwrap();
    let runs = &lines[0];
    assert_eq!(class_of(runs, "\"name\""), Class::Attribute);
    assert_eq!(class_of(runs, "\"keel\""), Class::String);
    assert_eq!(class_of(runs, "3"), Class::Number);
    assert_eq!(class_of(runs, "true"), Class::Constant);
}

#[test]
fn python_and_bash_highlight() {
    let py = highlight("python", "def f(x):\n    return 'a'  # c").unwrap();
    assert_eq!(class_of(&py[0], "def"), Class::Keyword);
    assert_eq!(class_of(&py[1], "return"), Class::Keyword);
    assert_eq!(class_of(&py[1], "# c"), Class::Comment);
    let sh = highlight("bash", "echo \"$HOME\" # home").unwrap();
    assert!(sh[0].iter().any(|(c, _)| *c == Class::String));
    assert_eq!(class_of(&sh[0], "# home"), Class::Comment);
}

#[test]
fn toml_headers_keys_values_and_multiline_strings() {
    let src = "[package] # p\nname = \"keel\"\nn = 3\nok = true\ns = \"\"\"\nmore\n\"\"\"\n[[bin]]";
    let lines = highlight("toml", src).unwrap();
    for (runs, line) in lines.iter().zip(src.lines()) {
        assert_eq!(joined(runs), line);
    }
    assert_eq!(class_of(&lines[0], "[package]"), Class::Type);
    assert_eq!(class_of(&lines[0], "# p"), Class::Comment);
    assert_eq!(class_of(&lines[1], "name"), Class::Attribute);
    assert_eq!(class_of(&lines[1], "\"keel\""), Class::String);
    assert_eq!(class_of(&lines[2], "3"), Class::Number);
    assert_eq!(class_of(&lines[3], "true"), Class::Constant);
    assert_eq!(class_of(&lines[5], "more"), Class::String);
    assert_eq!(class_of(&lines[6], "\"\"\""), Class::String);
    assert_eq!(class_of(&lines[7], "[[bin]]"), Class::Type);
}

#[test]
fn overlong_lines_stay_plain_and_intact() {
    let long = format!("let x = \"{}\";", "a".repeat(MAX_LINE_BYTES));
    let lines = highlight("rust", &format!("{long}\nlet y = 1;")).unwrap();
    assert_eq!(lines[0], vec![(Class::Plain, long)]);
    assert_eq!(class_of(&lines[1], "let"), Class::Keyword);
}

#[test]
fn a_cloned_highlighter_does_not_move_the_original() {
    let mut h = Highlighter::for_info("rust").unwrap();
    h.line("/* open");
    let mut fork = h.clone();
    fork.line("*/");
    assert_eq!(class_of(&h.line("still"), "still"), Class::Comment);
}

#[test]
fn any_text_in_any_language_comes_back_intact() {
    // A tiny xorshift, so the lines are the same on every run.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: Vec<char> = "ab1 \t\"'`#/*-+=<>{}[]()\\$;:,.|&!?%@~_\u{e9}日👩\u{200d}💻\r"
        .chars()
        .collect();
    for lang in [
        "rust", "python", "js", "json", "toml", "yaml", "bash", "diff", "go", "c", "html",
    ] {
        let mut h = Highlighter::for_info(lang).unwrap();
        for _ in 0..200 {
            let len = (next() % 40) as usize;
            let line: String = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let runs = h.line(&line);
            assert_eq!(joined(&runs), line, "{lang}: {line:?}");
            assert!(runs.iter().all(|(_, t)| !t.is_empty()), "{lang}: empty run");
        }
    }
}
