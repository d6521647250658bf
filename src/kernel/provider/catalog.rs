//! The built-in model catalog: the providers keel knows, their defaults, and the models each
//! lists with limits and list prices. Data only: one row per model, each with its source and
//! the date it was read. To update, edit the rows (the facts come from the vendors' model and
//! pricing pages; keel's digest of them is `shared/reference/providers.md` §4).

use super::model::{API_ANTHROPIC, API_GEMINI, API_OPENAI, API_RESPONSES};

/// One built-in provider.
pub(super) struct BuiltinProvider {
    pub name: &'static str,
    /// The API for model ids the catalog does not list and at a URL the user chose.
    pub api: &'static str,
    /// The API the listed models speak at `base_url`.
    pub model_api: &'static str,
    pub base_url: &'static str,
    pub key_env: Option<&'static str>,
    /// A second key variable, read when `key_env` is unset.
    pub key_env_alt: Option<&'static str>,
    pub base_url_env: Option<&'static str>,
    pub default_model: Option<&'static str>,
    pub models: &'static [Builtin],
}

/// One built-in model.
pub(super) struct Builtin {
    pub id: &'static str,
    pub name: &'static str,
    /// The thinking levels it accepts, weakest first ([`NO_REASONING`] for none).
    pub reasoning: &'static [&'static str],
    /// Anthropic adaptive thinking (`effort`) rather than a token budget (models from 4.6 on;
    /// 4.7 and later refuse a budget).
    pub adaptive: bool,
    /// Input, output, cache read, cache write: USD per million tokens.
    pub cost: [f64; 4],
    pub context: u64,
    pub max_out: u64,
    pub image: bool,
}

pub(super) const NO_REASONING: &[&str] = &["off"];
pub(super) const EFFORT_MINIMAL: &[&str] = &["off", "minimal", "low", "medium", "high"];
pub(super) const EFFORT_XHIGH: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
/// Gemini 3 and later: `thinkingLevel` low, medium or high (`off` sends none).
const LEVELS: &[&str] = &["off", "low", "medium", "high"];
const BUDGET: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];

/// A row with the usual defaults (text and images, no adaptive thinking).
const fn row(
    id: &'static str,
    name: &'static str,
    reasoning: &'static [&'static str],
    cost: [f64; 4],
    context: u64,
    max_out: u64,
) -> Builtin {
    Builtin {
        id,
        name,
        reasoning,
        adaptive: false,
        cost,
        context,
        max_out,
        image: true,
    }
}

/// An Anthropic row with adaptive thinking.
const fn adaptive(id: &'static str, name: &'static str, cost: [f64; 4]) -> Builtin {
    Builtin {
        adaptive: true,
        ..row(id, name, EFFORT_XHIGH, cost, 1_000_000, 128_000)
    }
}

pub(super) const PROVIDERS: &[BuiltinProvider] = &[
    BuiltinProvider {
        name: "openai",
        api: API_OPENAI,
        model_api: API_RESPONSES,
        base_url: "https://api.openai.com/v1",
        key_env: Some("OPENAI_API_KEY"),
        key_env_alt: None,
        base_url_env: Some("OPENAI_BASE_URL"),
        default_model: Some("gpt-6.2-sol"),
        models: OPENAI_MODELS,
    },
    BuiltinProvider {
        name: "anthropic",
        api: API_ANTHROPIC,
        model_api: API_ANTHROPIC,
        base_url: "https://api.anthropic.com",
        key_env: Some("ANTHROPIC_API_KEY"),
        key_env_alt: None,
        base_url_env: Some("ANTHROPIC_BASE_URL"),
        default_model: Some("claude-sonnet-5-5"),
        models: ANTHROPIC_MODELS,
    },
    BuiltinProvider {
        name: "google",
        api: API_GEMINI,
        model_api: API_GEMINI,
        base_url: "https://generativelanguage.googleapis.com",
        key_env: Some("GEMINI_API_KEY"),
        key_env_alt: Some("GOOGLE_API_KEY"),
        base_url_env: Some("GOOGLE_GEMINI_BASE_URL"),
        default_model: Some("gemini-4-argon"),
        models: GOOGLE_MODELS,
    },
    BuiltinProvider {
        name: "deepseek",
        api: API_OPENAI,
        model_api: API_OPENAI,
        base_url: "https://api.deepseek.com/v1",
        key_env: Some("DEEPSEEK_API_KEY"),
        key_env_alt: None,
        base_url_env: None,
        default_model: Some("deepseek-chat"),
        models: DEEPSEEK_MODELS,
    },
    BuiltinProvider {
        name: "openrouter",
        api: API_OPENAI,
        model_api: API_OPENAI,
        base_url: "https://openrouter.ai/api/v1",
        key_env: Some("OPENROUTER_API_KEY"),
        key_env_alt: None,
        base_url_env: None,
        default_model: None,
        models: &[],
    },
    BuiltinProvider {
        name: "groq",
        api: API_OPENAI,
        model_api: API_OPENAI,
        base_url: "https://api.groq.com/openai/v1",
        key_env: Some("GROQ_API_KEY"),
        key_env_alt: None,
        base_url_env: None,
        default_model: None,
        models: &[],
    },
    BuiltinProvider {
        name: "ollama",
        api: API_OPENAI,
        model_api: API_OPENAI,
        base_url: "http://localhost:11434/v1",
        key_env: None,
        key_env_alt: None,
        base_url_env: Some("OLLAMA_BASE_URL"),
        default_model: None,
        models: &[],
    },
];

// Where a price is unknown, a cached read costs as much as fresh input (a cost estimate
// never undercounts); an unknown window or output limit is the family's, marked "unverified".
const OPENAI_MODELS: &[Builtin] = &[
    // developers.openai.com/api/docs/models/gpt-6.2-sol, read 2026-12 (verified). Cache write
    // $2.50 is the 30-minute tier; input over 272K tokens is billed higher (not modelled).
    row(
        "gpt-6.2-sol",
        "GPT-6.2 Sol",
        EFFORT_XHIGH,
        [2.0, 10.0, 0.1, 2.5],
        1_050_000,
        128_000,
    ),
    // Release coverage 2026-11-17 (reported: apidog, dev.to); limits unverified (Sol's).
    row(
        "gpt-6.2-astra",
        "GPT-6.2 Astra",
        EFFORT_XHIGH,
        [8.0, 40.0, 0.4, 0.0],
        1_050_000,
        128_000,
    ),
    // Release notes 2026-09-29 (reported); limits unverified (6.2 Sol's).
    row(
        "gpt-6.1-sol",
        "GPT-6.1 Sol",
        EFFORT_XHIGH,
        [2.0, 10.0, 0.1, 0.0],
        1_050_000,
        128_000,
    ),
    // Release coverage 2026-09-22 (reported); limits unverified (6.2 Sol's).
    row(
        "gpt-6-sol",
        "GPT-6 Sol",
        EFFORT_XHIGH,
        [2.0, 10.0, 0.2, 0.0],
        1_050_000,
        128_000,
    ),
    // 2026-09-22 (reported); cached price unknown; limits unverified (6.2 Sol's).
    row(
        "gpt-6-luna",
        "GPT-6 Luna",
        EFFORT_XHIGH,
        [0.1, 0.5, 0.1, 0.0],
        1_050_000,
        128_000,
    ),
    // vercel.com/ai-gateway model pages (reported, read 2026-12); cached price unknown; limits
    // unverified (GPT-5's).
    row(
        "gpt-5.5",
        "GPT-5.5",
        EFFORT_MINIMAL,
        [5.0, 30.0, 5.0, 0.0],
        400_000,
        128_000,
    ),
    // Legacy: OpenAI's pricing and model pages as read in 2025.
    row(
        "gpt-5",
        "GPT-5",
        EFFORT_MINIMAL,
        [1.25, 10.0, 0.125, 0.0],
        400_000,
        128_000,
    ),
    row(
        "gpt-4.1",
        "GPT-4.1",
        NO_REASONING,
        [2.0, 8.0, 0.5, 0.0],
        1_047_576,
        32_768,
    ),
];

// platform.claude.com model overview and pricing pages, read 2026-12 via the index revision
// after Opus 5.5's release (verified). Cache writes are the 5-minute tier, 1.25x input
// (prompt-caching page); reads as published, else 0.1x input.
const ANTHROPIC_MODELS: &[Builtin] = &[
    // Thinking always on; default effort high.
    adaptive(
        "claude-fable-5-1",
        "Claude Fable 5.1",
        [10.0, 50.0, 0.25, 12.5],
    ),
    // Thinking always on; default effort medium.
    adaptive("claude-opus-5-5", "Claude Opus 5.5", [4.0, 20.0, 0.2, 5.0]),
    adaptive(
        "claude-sonnet-5-5",
        "Claude Sonnet 5.5",
        [2.0, 10.0, 0.1, 2.5],
    ),
    // Legacy since Opus 5.5; read $0.50 and write $6.25 as published.
    adaptive("claude-opus-5", "Claude Opus 5", [5.0, 25.0, 0.5, 6.25]),
    adaptive("claude-sonnet-5", "Claude Sonnet 5", [2.0, 10.0, 0.2, 2.5]),
    // Legacy 4.x with budget thinking: prices as published; limits from the 2025 pages.
    row(
        "claude-sonnet-4-5",
        "Claude Sonnet 4.5",
        BUDGET,
        [3.0, 15.0, 0.3, 3.75],
        200_000,
        64_000,
    ),
    row(
        "claude-haiku-4-5",
        "Claude Haiku 4.5",
        BUDGET,
        [1.0, 5.0, 0.1, 1.25],
        200_000,
        64_000,
    ),
];

// shared/reference/providers.md §4.3 (reported: api-evangelist/deepmind pricing yml, read
// 2026-10-07; TokenMeter v0.17.0 price tables). Cached reads as published, else the input
// price (never undercount); context caching's storage is billed per hour, not per write, so
// cache write is 0. `gemini-3.8-flash` is left out: its output price is unknown (input $0.75
// until 2026-12-31, reported); reach it through models.json or GOOGLE_GEMINI_BASE_URL.
const GOOGLE_MODELS: &[Builtin] = &[
    // Announced 2026-09-30, paid API from 2026-10-13; 1,048,576 / 65,536. Prices from
    // 2026-12-01 ($2 / $0.10 / $10 until 2026-11-30).
    row(
        "gemini-4-argon",
        "Gemini 4 Argon",
        LEVELS,
        [4.0, 20.0, 0.2, 0.0],
        1_048_576,
        65_536,
    ),
    // Same source; limits unverified (Argon's).
    row(
        "gemini-4-neon",
        "Gemini 4 Neon",
        LEVELS,
        [3.0, 15.0, 0.15, 0.0],
        1_048_576,
        65_536,
    ),
    // Same source; cached price unknown; limits unverified (Argon's).
    row(
        "gemini-4-hydrogen",
        "Gemini 4 Hydrogen",
        LEVELS,
        [1.5, 7.5, 1.5, 0.0],
        1_048_576,
        65_536,
    ),
    // Reported ($2 / $12); cached price unknown; limits unverified (Argon's).
    row(
        "gemini-3.1-pro-preview",
        "Gemini 3.1 Pro (preview)",
        LEVELS,
        [2.0, 12.0, 2.0, 0.0],
        1_048_576,
        65_536,
    ),
];

// api-docs.deepseek.com pricing, read 2025.
const DEEPSEEK_MODELS: &[Builtin] = &[
    Builtin {
        image: false,
        ..row(
            "deepseek-chat",
            "DeepSeek V3 (chat)",
            NO_REASONING,
            [0.28, 0.42, 0.028, 0.0],
            128_000,
            8_192,
        )
    },
    Builtin {
        image: false,
        ..row(
            "deepseek-reasoner",
            "DeepSeek V3 (reasoner)",
            NO_REASONING,
            [0.28, 0.42, 0.028, 0.0],
            128_000,
            65_536,
        )
    },
];

/// Claude Code's model aliases and the Anthropic model each stands for today (Claude Code's
/// `sonnet`, `opus` and `haiku` name the newest model of the family; the ids are this
/// catalog's). `inherit` and unknown words are `None`: the caller decides what they mean.
const CLAUDE_ALIASES: &[(&str, &str)] = &[
    ("sonnet", "claude-sonnet-5-5"),
    ("opus", "claude-opus-5-5"),
    ("haiku", "claude-haiku-4-5"),
    ("fable", "claude-fable-5-1"),
];

/// The Anthropic model id a Claude Code alias (`sonnet`, `opus`, `haiku`, `fable`; any case,
/// surrounding blanks ignored) stands for, e.g. `claude_alias("sonnet")` →
/// `Some("claude-sonnet-5-5")`; `None` for anything else (`inherit`, full ids).
pub fn claude_alias(word: &str) -> Option<&'static str> {
    let word = word.trim();
    CLAUDE_ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(word))
        .map(|(_, id)| *id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_aliases_name_listed_anthropic_models() {
        assert_eq!(claude_alias("sonnet"), Some("claude-sonnet-5-5"));
        assert_eq!(claude_alias(" Opus "), Some("claude-opus-5-5"));
        assert_eq!(claude_alias("haiku"), Some("claude-haiku-4-5"));
        assert_eq!(claude_alias("inherit"), None);
        assert_eq!(claude_alias("claude-sonnet-5-5"), None);
        for (_, id) in CLAUDE_ALIASES {
            assert!(ANTHROPIC_MODELS.iter().any(|m| m.id == *id), "{id}");
        }
    }
}
