//! S3 stores: the object store an `s3://bucket/prefix` lake lives in.
//!
//! Credentials come only from the DuckDB secret the attach found for the URL (the C++ layer
//! looks it up in DuckDB's secret manager and hands its fields over as [`S3Secret`]); moraine
//! never falls back to an implicit credential chain, whose last resort is the cloud
//! instance-metadata address. A secret created with `PROVIDER credential_chain` carries no keys:
//! those are read from the process's `AWS_*` environment variables, and nothing else.

use crate::error::{Error, Result};
use object_store::aws::{AmazonS3Builder, AwsCredential};
use object_store::prefix::PrefixStore;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, RetryConfig, StaticCredentialProvider,
};
use std::sync::Arc;
use std::time::Duration;

/// How long connecting may take (at most the store's time limit).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many times a failed request is retried.
pub(crate) const MAX_RETRIES: usize = 3;

/// The fields of a DuckDB `s3` secret that reach a store, by the names httpfs gives them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Secret {
    /// The secret's name, for messages.
    pub name: String,
    /// `config` (keys in the secret) or `credential_chain` (keys from `AWS_*` variables).
    pub provider: String,
    pub key_id: String,
    pub secret: String,
    pub session_token: String,
    pub region: String,
    /// `host[:port]`, no scheme; empty or `s3.amazonaws.com` for AWS itself.
    pub endpoint: String,
    /// `path` or `vhost`.
    pub url_style: String,
    pub use_ssl: bool,
}

impl std::fmt::Debug for S3Secret {
    /// Never prints the key or the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Secret")
            .field("name", &self.name)
            .field("provider", &self.provider)
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .field("url_style", &self.url_style)
            .field("use_ssl", &self.use_ssl)
            .finish_non_exhaustive()
    }
}

impl S3Secret {
    /// The secret from the `s3.*` options the C++ layer passes (`s3.key_id`, `s3.secret`, ...);
    /// `None` when it passed none.
    pub fn from_options(options: &[(String, String)]) -> Result<Option<S3Secret>> {
        let mut out = S3Secret {
            use_ssl: true,
            ..Default::default()
        };
        let mut any = false;
        for (k, v) in options {
            let Some(field) = k.strip_prefix("s3.") else {
                continue;
            };
            any = true;
            match field {
                "name" => out.name = v.clone(),
                "provider" => out.provider = v.clone(),
                "key_id" => out.key_id = v.clone(),
                "secret" => out.secret = v.clone(),
                "session_token" => out.session_token = v.clone(),
                "region" => out.region = v.clone(),
                "endpoint" => out.endpoint = v.clone(),
                "url_style" => out.url_style = v.clone(),
                "use_ssl" => {
                    out.use_ssl = match v.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(Error::InvalidInput(format!(
                                "secret {}: USE_SSL is '{v}', not true or false",
                                out.name
                            )))
                        }
                    }
                }
                other => {
                    return Err(Error::InvalidInput(format!(
                        "moraine: unknown store option s3.{other}"
                    )))
                }
            }
        }
        Ok(any.then_some(out))
    }

    /// `text` without the secret key or the session token in it (an S3 error body may echo the
    /// request it refused, token included).
    pub fn redact(&self, mut text: String) -> String {
        for hidden in [&self.secret, &self.session_token] {
            if hidden.len() >= 4 {
                text = text.replace(hidden.as_str(), "<redacted>");
            }
        }
        text
    }

    /// The key, secret and token to sign with: the secret's own, or for `credential_chain` the
    /// process's `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`.
    fn credential(&self, url: &str) -> Result<AwsCredential> {
        let (key_id, secret, token) =
            if self.provider == "credential_chain" && self.key_id.is_empty() {
                let var = |n: &str| std::env::var(n).unwrap_or_default();
                (
                    var("AWS_ACCESS_KEY_ID"),
                    var("AWS_SECRET_ACCESS_KEY"),
                    var("AWS_SESSION_TOKEN"),
                )
            } else {
                (
                    self.key_id.clone(),
                    self.secret.clone(),
                    self.session_token.clone(),
                )
            };
        if key_id.is_empty() || secret.is_empty() {
            return Err(Error::Url {
                url: url.to_string(),
                reason: format!(
                    "secret '{}' gives no KEY_ID and SECRET{}; moraine uses only explicit \
                     credentials",
                    self.name,
                    if self.provider == "credential_chain" {
                        " and AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set"
                    } else {
                        ""
                    }
                ),
            });
        }
        Ok(AwsCredential {
            key_id,
            secret_key: secret,
            token: (!token.is_empty()).then_some(token),
        })
    }
}

/// Whether `endpoint` names AWS S3 itself (object_store then builds the region's endpoint).
fn is_aws(endpoint: &str) -> bool {
    endpoint.is_empty() || endpoint == "s3.amazonaws.com"
}

/// The object store for `bucket`, rooted at `prefix`, signed with `secret`'s credentials; one
/// request and its retries take at most `io_timeout`.
pub fn object_store(
    url: &str,
    bucket: &str,
    prefix: &str,
    secret: &S3Secret,
    io_timeout: Duration,
) -> Result<Arc<dyn ObjectStore>> {
    let credential = secret.credential(url)?;
    let path_style = match secret.url_style.as_str() {
        "path" => true,
        "vhost" | "" => false,
        other => {
            return Err(Error::InvalidInput(format!(
                "secret '{}': URL_STYLE is '{other}', not 'path' or 'vhost'",
                secret.name
            )))
        }
    };
    let region = if secret.region.is_empty() {
        "us-east-1"
    } else {
        &secret.region
    };
    if secret.endpoint.contains("://") {
        return Err(Error::InvalidInput(format!(
            "secret '{}': ENDPOINT is '{}'; give host[:port] without a scheme (USE_SSL chooses \
             HTTPS or HTTP)",
            secret.name, secret.endpoint
        )));
    }
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(region)
        // explicit credentials override every other source: no environment, profile or
        // instance-metadata lookup
        .with_credentials(Arc::new(StaticCredentialProvider::new(credential)))
        .with_virtual_hosted_style_request(!path_style)
        .with_client_options(
            ClientOptions::new()
                .with_allow_http(!secret.use_ssl)
                .with_timeout(io_timeout)
                .with_connect_timeout(CONNECT_TIMEOUT.min(io_timeout)),
        )
        .with_retry(RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: MAX_RETRIES,
            retry_timeout: io_timeout,
        });
    if !is_aws(&secret.endpoint) {
        let scheme = if secret.use_ssl { "https" } else { "http" };
        let host = &secret.endpoint;
        builder = builder.with_endpoint(if path_style {
            format!("{scheme}://{host}")
        } else {
            format!("{scheme}://{bucket}.{host}")
        });
    }
    let store = builder.build().map_err(|e| Error::Url {
        url: url.to_string(),
        reason: format!("cannot configure S3 with secret '{}': {e}", secret.name),
    })?;
    Ok(if prefix.is_empty() {
        Arc::new(store)
    } else {
        Arc::new(PrefixStore::new(store, prefix))
    })
}

/// One listing of the store's root, before SlateDB opens it: a missing bucket, a refused key or
/// an endpoint that does not answer is an error naming the URL now (SlateDB would retry such a
/// failure without end). Reads only.
pub async fn probe(
    store: &Arc<dyn ObjectStore>,
    url: &str,
    secret: &S3Secret,
    io_timeout: Duration,
) -> Result<()> {
    let listing = async {
        match store.list_with_delimiter(None).await {
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Unreachable {
                location: url.to_string(),
                reason: secret.redact(crate::error::with_sources(&e)),
            }),
        }
    };
    crate::store::within(io_timeout, url, "listing the prefix", listing).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_secret_is_read_from_its_options_and_never_printed() {
        assert_eq!(S3Secret::from_options(&opts(&[])).unwrap(), None);
        let s = S3Secret::from_options(&opts(&[
            ("s3.name", "lake_key"),
            ("s3.key_id", "AKIDEXAMPLE"),
            ("s3.secret", "very-secret"),
            ("s3.endpoint", "127.0.0.1:9000"),
            ("s3.url_style", "path"),
            ("s3.use_ssl", "false"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((s.key_id.as_str(), s.use_ssl), ("AKIDEXAMPLE", false));
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("AKID"),
            "{shown}"
        );
        assert!(S3Secret::from_options(&opts(&[("s3.use_ssl", "yes")])).is_err());
        assert!(S3Secret::from_options(&opts(&[("s3.colour", "red")])).is_err());
    }

    #[test]
    fn a_secret_without_keys_is_refused_naming_the_url() {
        let s = S3Secret {
            name: "empty".into(),
            provider: "config".into(),
            ..Default::default()
        };
        let e = object_store("s3://bucket/x", "bucket", "x", &s, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("s3://bucket/x") && e.contains("'empty'"), "{e}");
    }

    #[test]
    fn an_endpoint_with_a_scheme_is_refused_and_errors_never_show_the_secret() {
        let s = S3Secret {
            name: "k".into(),
            key_id: "a".into(),
            secret: "very-secret-key".into(),
            session_token: "token-1234".into(),
            endpoint: "http://127.0.0.1:9000".into(),
            ..Default::default()
        };
        let e = object_store("s3://bucket/x", "bucket", "x", &s, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("ENDPOINT") && e.contains("without a scheme"),
            "{e}"
        );
        let shown = s.redact("refused: x-amz-security-token=token-1234 key very-secret-key".into());
        assert!(
            !shown.contains("token-1234") && !shown.contains("very-secret-key"),
            "{shown}"
        );
    }

    #[test]
    fn a_bad_url_style_is_refused() {
        let s = S3Secret {
            name: "k".into(),
            key_id: "a".into(),
            secret: "b".into(),
            url_style: "sideways".into(),
            ..Default::default()
        };
        let e = object_store("s3://bucket/x", "bucket", "x", &s, Duration::from_secs(1))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("URL_STYLE"), "{e}");
    }
}
