//! The models a served session can switch to (`set_model`, `cycle_model`,
//! `get_available_models`, so also the TUI's `/model` and ACP's model option): what the
//! endpoint keel started with serves, reached with the key that came with it, plus the built-in
//! models of other providers whose own keys are configured, at their own URLs. A key never goes
//! to a URL it did not come with. Built by startup from flags and environment; never reads
//! either.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::kernel::provider::http::{ClientError, HttpOptions, HttpProvider};
use crate::kernel::provider::model::{ModelInfo, OpenAiCompat, ProviderInfo, Registry};
use crate::kernel::provider::served;
use crate::kernel::provider::Provider;

/// The longest wait for the start server's model list, asked for while a client waits.
const LIST_WAIT: Duration = Duration::from_secs(10);

/// Where the model keel started with is served, and with which key.
#[derive(Debug, Clone)]
pub struct StartEndpoint {
    /// The URL the start model is reached at (`--base-url`, a URL variable or the provider's).
    pub url: String,
    /// The key that came with that URL (`--api-key`, models.json or the provider's variable).
    pub key: Option<String>,
    /// Which models that URL serves.
    pub catalog: Catalog,
}

/// Which models the start endpoint serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Catalog {
    /// The registry's models of the start provider (the vendor's own URL).
    Registry,
    /// What the server lists (`GET /models`); asked for when first needed.
    Server,
    /// What the server listed (empty when it gave no list).
    Listed(Vec<String>),
}

/// Why a model cannot be switched to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    /// No provider of that name, or it lists no such model.
    NotFound { provider: String, model: String },
    /// The server keel started with does not list the model.
    NotServed {
        provider: String,
        model: String,
        url: String,
        served: Vec<String>,
    },
    /// The provider's own key is not configured (`var`: the variable that holds it).
    NoKey { provider: String, var: String },
    /// The provider's models are what its own server lists (`at`: its URL variable or URL),
    /// and keel was started with another.
    OtherServer { provider: String, at: String },
    /// The HTTP client could not be set up.
    Client(ClientError),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::NotFound { provider, model } => {
                write!(f, "Model not found: {provider}/{model}")
            }
            ModelError::NotServed {
                provider,
                model,
                url,
                served,
            } => {
                write!(
                    f,
                    "Model not found: {provider}/{model}: {url} does not serve it"
                )?;
                match served.is_empty() {
                    true => write!(f, " (it did not list its models)"),
                    false => write!(f, " (it serves {})", served.join(", ")),
                }
            }
            ModelError::NoKey { provider, var } => write!(
                f,
                "No API key for provider {provider}: set {var} before starting keel"
            ),
            ModelError::OtherServer { provider, at } => write!(
                f,
                "the {provider} provider is the server at {at}, not the one this session \
                 started with: start keel with --provider {provider} to use its models"
            ),
            ModelError::Client(e) => f.write_str(&e.message),
        }
    }
}

impl std::error::Error for ModelError {}

/// The models a running session can switch to (RPC `set_model`, `cycle_model`).
#[derive(Debug)]
pub struct Models {
    registry: Registry,
    vars: BTreeMap<String, String>,
    options: HttpOptions,
    /// The model keel started with (a scripted model or an unlisted `--base-url` model is only
    /// reachable through it).
    start: Arc<dyn Provider>,
    /// Where it is served; `None` for a provider without a URL (scripted, unconfigured).
    endpoint: Option<StartEndpoint>,
}

impl Models {
    /// `registry`: the known providers and models; `vars`: the environment (keys, base URLs);
    /// `endpoint`: where `start` is served and with which key.
    pub fn new(
        registry: Registry,
        vars: BTreeMap<String, String>,
        options: HttpOptions,
        start: Arc<dyn Provider>,
        endpoint: Option<StartEndpoint>,
    ) -> Models {
        Models {
            registry,
            vars,
            options,
            start,
            endpoint,
        }
    }

    /// The same models for a session that starts with `start` (a subagent's): the start
    /// endpoint is kept only when `start` is served by the same provider.
    pub fn starting_with(&self, start: Arc<dyn Provider>) -> Models {
        let same = start.name() == self.start.name();
        Models {
            registry: self.registry.clone(),
            vars: self.vars.clone(),
            options: self.options,
            start,
            endpoint: self.endpoint.clone().filter(|_| same),
        }
    }

    /// The model keel started with.
    pub fn start_provider(&self) -> Arc<dyn Provider> {
        self.start.clone()
    }

    /// Every model that can be used now, the starting model first: the start endpoint's, then
    /// those of other providers reachable with their own keys.
    pub async fn available(&mut self) -> Vec<ModelInfo> {
        let start = self.start.info().clone();
        let mut out = vec![start.clone()];
        let served = self.endpoint_models().await;
        out.extend(served.into_iter().filter(|m| m.id != start.id));
        for p in &self.registry.providers {
            if p.name == start.provider || self.own_key(p).is_err() {
                continue;
            }
            out.extend(p.models.iter().map(|m| self.at_own_url(p, m.clone())));
        }
        out
    }

    /// A provider for `provider/model_id`, if that model is available.
    pub async fn build(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<Arc<dyn Provider>, ModelError> {
        if provider == self.start.name() && model_id == self.start.model() {
            return Ok(self.start.clone());
        }
        let not_found = || ModelError::NotFound {
            provider: provider.to_string(),
            model: model_id.to_string(),
        };
        if provider == self.start.name() {
            return self.build_served(provider, model_id).await;
        }
        let p = self.registry.provider(provider).ok_or_else(not_found)?;
        let key = self.own_key(p)?;
        let info = p.models.iter().find(|m| m.id == model_id);
        let info = self.at_own_url(p, info.cloned().ok_or_else(not_found)?);
        let http = HttpProvider::new(info, key, self.options).map_err(ModelError::Client)?;
        Ok(Arc::new(http))
    }

    /// A model of the start endpoint, with the start endpoint's key.
    async fn build_served(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<Arc<dyn Provider>, ModelError> {
        let models = self.endpoint_models().await;
        let Some(endpoint) = &self.endpoint else {
            return Err(ModelError::NotFound {
                provider: provider.to_string(),
                model: model_id.to_string(),
            });
        };
        let Some(info) = models.into_iter().find(|m| m.id == model_id) else {
            return Err(match &endpoint.catalog {
                Catalog::Listed(served) => ModelError::NotServed {
                    provider: provider.to_string(),
                    model: model_id.to_string(),
                    url: endpoint.url.clone(),
                    served: served.clone(),
                },
                Catalog::Registry | Catalog::Server => ModelError::NotFound {
                    provider: provider.to_string(),
                    model: model_id.to_string(),
                },
            });
        };
        let http = HttpProvider::new(info, endpoint.key.clone(), self.options)
            .map_err(ModelError::Client)?;
        Ok(Arc::new(http))
    }

    /// The models the start endpoint serves, at its URL (the server is asked once, when
    /// first needed; no answer leaves just the start model).
    async fn endpoint_models(&mut self) -> Vec<ModelInfo> {
        let options = HttpOptions {
            connect_timeout: self.options.connect_timeout.min(LIST_WAIT),
            idle_timeout: self.options.idle_timeout.min(LIST_WAIT),
            ..self.options
        };
        let Some(endpoint) = &mut self.endpoint else {
            return Vec::new();
        };
        if endpoint.catalog == Catalog::Server {
            let listed = served::list_models(&endpoint.url, endpoint.key.as_deref(), &options);
            let ids = listed.await.unwrap_or_else(|e| {
                tracing::warn!("the start server gave no model list: {:?}", e.failure);
                Vec::new()
            });
            endpoint.catalog = Catalog::Listed(ids);
        }
        let start = self.start.info();
        let known = self.registry.provider(&start.provider);
        let mut models: Vec<ModelInfo> = match &endpoint.catalog {
            Catalog::Registry => known.map(|p| p.models.clone()).unwrap_or_default(),
            Catalog::Server => Vec::new(),
            Catalog::Listed(ids) => ids
                .iter()
                .map(|id| {
                    let listed = known.and_then(|p| p.models.iter().find(|m| &m.id == id));
                    listed.cloned().unwrap_or_else(|| {
                        ModelInfo::unlisted(&start.provider, &start.api, &endpoint.url, id)
                    })
                })
                .collect(),
        };
        match known {
            Some(p) => models
                .into_iter()
                .map(|m| p.place(m, &endpoint.url))
                .collect(),
            None => {
                for m in &mut models {
                    m.base_url = endpoint.url.clone();
                    m.compat = OpenAiCompat::for_base_url(&endpoint.url);
                }
                models
            }
        }
    }

    /// The key of a provider other than the start one: its own (models.json or its variable,
    /// never `--api-key`), when its models are the registry's.
    fn own_key(&self, p: &ProviderInfo) -> Result<Option<String>, ModelError> {
        let url_var = p
            .base_url_env
            .as_deref()
            .filter(|v| self.vars.contains_key(*v));
        if p.served_by_server(url_var.is_some()) {
            return Err(ModelError::OtherServer {
                provider: p.name.clone(),
                at: url_var.map_or_else(|| p.base_url.clone(), str::to_string),
            });
        }
        match (&p.key, &p.key_env) {
            (Some(k), _) => Ok(Some(k.clone())),
            (None, Some(var)) => match self.vars.get(var) {
                Some(k) => Ok(Some(k.clone())),
                None => Err(ModelError::NoKey {
                    provider: p.name.clone(),
                    var: var.clone(),
                }),
            },
            (None, None) => Ok(None),
        }
    }

    /// `info` at its provider's own URL (its URL variable, else the registry's).
    fn at_own_url(&self, p: &ProviderInfo, info: ModelInfo) -> ModelInfo {
        let url = p
            .base_url_env
            .as_deref()
            .and_then(|v| self.vars.get(v).cloned())
            .unwrap_or_else(|| p.base_url.clone());
        p.place(info, &url)
    }
}
