//! The models a served session can switch to (`set_model`, `cycle_model`,
//! `get_available_models`): the registry's models whose provider has credentials, plus the
//! model keel started with. Built by startup from flags and environment; never reads either.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::kernel::provider::http::{HttpOptions, HttpProvider};
use crate::kernel::provider::model::{ModelInfo, OpenAiCompat, ProviderInfo, Registry};
use crate::kernel::provider::Provider;

/// The models a running session can switch to (RPC `set_model`, `cycle_model`): the
/// registry's models whose provider has credentials, plus the model keel started with.
#[derive(Debug)]
pub struct Models {
    registry: Registry,
    vars: BTreeMap<String, String>,
    options: HttpOptions,
    /// `--api-key`: used for the provider keel started with.
    api_key: Option<String>,
    /// The model keel started with (a scripted model or an unlisted `--base-url` model is only
    /// reachable through it).
    start: Arc<dyn Provider>,
}

impl Models {
    /// `registry`: the known providers and models; `vars`: the environment (keys, base URLs);
    /// `api_key`: `--api-key`, used for the provider keel started with.
    pub fn new(
        registry: Registry,
        vars: BTreeMap<String, String>,
        options: HttpOptions,
        api_key: Option<String>,
        start: Arc<dyn Provider>,
    ) -> Models {
        Models {
            registry,
            vars,
            options,
            api_key,
            start,
        }
    }

    /// The model keel started with.
    pub fn start_provider(&self) -> Arc<dyn Provider> {
        self.start.clone()
    }

    /// The key for a registry provider, if it has one (or needs none).
    fn key(&self, p: &ProviderInfo) -> Option<Option<String>> {
        if p.name == self.start.name() && self.api_key.is_some() {
            return Some(self.api_key.clone());
        }
        match (&p.key, &p.key_env) {
            (Some(k), _) => Some(Some(k.clone())),
            (None, Some(var)) => self.vars.get(var).map(|k| Some(k.clone())),
            (None, None) => Some(None),
        }
    }

    /// Every model that can be used now, the starting model first.
    pub fn available(&self) -> Vec<ModelInfo> {
        let start = self.start.info();
        let mut out = vec![start.clone()];
        for p in &self.registry.providers {
            if self.key(p).is_none() {
                continue;
            }
            for m in &p.models {
                if !(m.provider == start.provider && m.id == start.id) {
                    out.push(self.with_base_url(p, m.clone()));
                }
            }
        }
        out
    }

    fn with_base_url(&self, p: &ProviderInfo, mut info: ModelInfo) -> ModelInfo {
        info.base_url = p
            .base_url_env
            .as_deref()
            .and_then(|v| self.vars.get(v).cloned())
            .unwrap_or_else(|| p.base_url.clone());
        info.compat = OpenAiCompat::for_base_url(&info.base_url);
        info
    }

    /// A provider for `provider/model_id`, if that model is available.
    pub fn build(&self, provider: &str, model_id: &str) -> Result<Arc<dyn Provider>, String> {
        if provider == self.start.name() && model_id == self.start.model() {
            return Ok(self.start.clone());
        }
        let not_found = || format!("Model not found: {provider}/{model_id}");
        let p = self.registry.provider(provider).ok_or_else(not_found)?;
        let info = p
            .models
            .iter()
            .find(|m| m.id == model_id)
            .cloned()
            .ok_or_else(not_found)?;
        let Some(key) = self.key(p) else {
            let var = p.key_env.as_deref().unwrap_or("an API key");
            return Err(format!(
                "No API key for provider {provider}: set {var} before starting keel"
            ));
        };
        let info = self.with_base_url(p, info);
        let http = HttpProvider::new(info, key, self.options)?;
        Ok(Arc::new(http))
    }
}
