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
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::sync::Arc;
use std::time::Duration;
use url::Url;

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
    /// DuckDB's `http_proxy` setting (`host:port`, or an `http://` / `https://` URL; it starts
    /// out as the HTTP_PROXY environment variable), and its `http_proxy_username` /
    /// `http_proxy_password`. Not the secret's fields, but they travel with it to where the HTTP
    /// client is built, so moraine's requests take the route httpfs's take.
    pub http_proxy: String,
    pub http_proxy_username: String,
    pub http_proxy_password: String,
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
            .field("http_proxy", &without_userinfo(&self.http_proxy))
            .finish_non_exhaustive()
    }
}

impl S3Secret {
    /// The secret from the `s3.*` options the C++ layer passes: every field of the DuckDB
    /// secret (`s3.key_id`, `s3.secret`, ...; with `s3.name`, `s3.type` and `s3.provider`) and
    /// DuckDB's proxy settings ([`crate::settings::store_options`]); `None` when it passed none.
    /// A secret of another type than s3 is refused; fields a store does not use (httpfs's
    /// `kms_key_id`, `requester_pays`, `url_compatibility_mode`, ...) are left.
    pub fn from_options(options: &[(String, String)]) -> Result<Option<S3Secret>> {
        let mut out = S3Secret {
            use_ssl: true,
            ..Default::default()
        };
        let field = |name: &str| {
            options
                .iter()
                .find(|(k, _)| k.strip_prefix("s3.") == Some(name))
        };
        let name = field("name").map(|(_, v)| v.clone()).unwrap_or_default();
        if let Some((_, type_)) = field("type").filter(|(_, v)| v != "s3") {
            return Err(Error::InvalidInput(format!(
                "moraine: secret \"{name}\" is of type {type_}; an s3:// lake needs a secret of type s3"
            )));
        }
        // DuckDB's proxy settings travel with a secret, but make none
        let mut any = false;
        for (k, v) in options {
            let Some(field) = k.strip_prefix("s3.") else {
                continue;
            };
            any |= !field.starts_with("http_proxy");
            match field {
                "name" => out.name = v.clone(),
                "provider" => out.provider = v.clone(),
                "key_id" => out.key_id = v.clone(),
                "secret" => out.secret = v.clone(),
                "session_token" => out.session_token = v.clone(),
                "region" => out.region = v.clone(),
                "endpoint" => out.endpoint = v.clone(),
                "url_style" => out.url_style = v.clone(),
                "http_proxy" => out.http_proxy = v.clone(),
                "http_proxy_username" => out.http_proxy_username = v.clone(),
                "http_proxy_password" => out.http_proxy_password = v.clone(),
                "use_ssl" => {
                    out.use_ssl = match v.to_ascii_lowercase().as_str() {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => {
                            return Err(Error::InvalidInput(format!(
                                "secret {name}: USE_SSL is '{v}', not true or false"
                            )))
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(any.then_some(out))
    }

    /// `text` without the secret key, the session token or the proxy's password in it, the
    /// password also as it is written in a URL (an S3 error body may echo the request it
    /// refused, token included).
    pub fn redact(&self, mut text: String) -> String {
        let encoded = percent_encode(&self.http_proxy_password);
        for hidden in [
            &self.secret,
            &self.session_token,
            &self.http_proxy_password,
            &encoded,
        ] {
            if hidden.len() >= 4 {
                text = text.replace(hidden.as_str(), "<redacted>");
            }
        }
        text
    }

    /// The proxy every request goes through, as a URL (`http://` when `http_proxy` names no
    /// scheme) with the user name and password in it; `None` without `http_proxy`.
    fn proxy_url(&self, url: &str) -> Result<Option<String>> {
        let proxy = self.http_proxy.trim();
        if proxy.is_empty() {
            return Ok(None);
        }
        let refused = || Error::Url {
            url: url.to_string(),
            reason: format!(
                "the http_proxy setting (it starts out as HTTP_PROXY) is '{}'; give host:port, \
                 or http://host:port or https://host:port (the user name and password go in \
                 http_proxy_username and http_proxy_password)",
                without_userinfo(proxy)
            ),
        };
        let parsed = if proxy.contains("://") {
            Url::parse(proxy)
        } else {
            Url::parse(&format!("http://{proxy}"))
        };
        let mut proxy_url = parsed.map_err(|_| refused())?;
        // any other scheme would make reqwest drop the proxy and go direct, silently; a host
        // and port only (and trailing slashes): no path, query or fragment, and no user name
        // or password (not even an empty one: an `@` is refused wherever it is)
        if !matches!(proxy_url.scheme(), "http" | "https")
            || proxy_url.host_str().is_none_or(str::is_empty)
            || !proxy_url.path().chars().all(|c| c == '/')
            || proxy_url.query().is_some()
            || proxy_url.fragment().is_some()
            || proxy.contains('@')
        {
            return Err(refused());
        }
        // (trailing slashes dropped, as before)
        proxy_url.set_path("/");
        let user = &self.http_proxy_username;
        if !user.is_empty() {
            // escaped here, as redact() finds them (the setters leave a %XX as it is)
            proxy_url
                .set_username(&percent_encode(user))
                .map_err(|_| refused())?;
            proxy_url
                .set_password(Some(&percent_encode(&self.http_proxy_password)))
                .map_err(|_| refused())?;
        }
        Ok(Some(proxy_url.into()))
    }

    /// The key, secret and token to sign with: the secret's own, or for `credential_chain` the
    /// process's `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`.
    fn credential(&self, url: &str) -> Result<AwsCredential> {
        self.credential_from(url, |n| std::env::var(n).ok())
    }

    /// [`S3Secret::credential`] with the environment read through `env`.
    fn credential_from(
        &self,
        url: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AwsCredential> {
        let (key_id, secret, token) =
            if self.provider == "credential_chain" && self.key_id.is_empty() {
                let var = |n: &str| env(n).unwrap_or_default();
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

/// Which requests skip the `http_proxy` setting's proxy, from the `no_proxy` / `NO_PROXY`
/// variable (curl's reading, which httpfs's requests follow: lowercase first, empty unset).
#[derive(Debug, PartialEq, Eq)]
enum Exclusions {
    /// `*`: every request goes direct (reqwest's list would match `*` against host names
    /// only, not against an IP-address endpoint).
    Everything,
    /// The hosts and domains to reach directly, if any.
    Hosts(Option<String>),
}

fn proxy_exclusions(no_proxy: Option<String>) -> Exclusions {
    match no_proxy {
        Some(list) if list.split(',').any(|h| h.trim() == "*") => Exclusions::Everything,
        list => Exclusions::Hosts(list),
    }
}

/// The bytes [`percent_encode`] escapes: all but URL-unreserved ones (`A-Z a-z 0-9 - . _ ~`).
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` with every byte but URL-unreserved ones as `%XX`, for user information in a URL.
fn percent_encode(text: &str) -> String {
    utf8_percent_encode(text, NOT_UNRESERVED).to_string()
}

/// A proxy setting as it may be shown: without anything before an `@` in its authority (a
/// user name and password written into it).
fn without_userinfo(proxy: &str) -> String {
    let (scheme, rest) = match proxy.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), proxy),
    };
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}<redacted>@{host}"),
        None => proxy.to_string(),
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
    let mut client = ClientOptions::new()
        .with_allow_http(!secret.use_ssl)
        .with_timeout(io_timeout)
        .with_connect_timeout(CONNECT_TIMEOUT.min(io_timeout));
    if let Some(proxy) = secret.proxy_url(url)? {
        let no_proxy = ["no_proxy", "NO_PROXY"]
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()));
        match proxy_exclusions(no_proxy) {
            Exclusions::Everything => {}
            Exclusions::Hosts(hosts) => {
                client = client.with_proxy_url(proxy);
                if let Some(hosts) = hosts {
                    client = client.with_proxy_excludes(hosts);
                }
            }
        }
    }
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(region)
        // explicit credentials override every other source: no environment, profile or
        // instance-metadata lookup
        .with_credentials(Arc::new(StaticCredentialProvider::new(credential)))
        .with_virtual_hosted_style_request(!path_style)
        .with_client_options(client)
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
    crate::runtime::within(io_timeout, url, "listing the prefix", listing).await
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
        // DuckDB's proxy settings alone make no secret: the store then says to create one
        let proxy = S3Secret::from_options(&opts(&[("s3.http_proxy", "localhost:3128")]));
        assert_eq!(proxy.unwrap(), None);
        // a field of the secret a store does not use is left; a secret of another type refused
        let left =
            S3Secret::from_options(&opts(&[("s3.requester_pays", "false"), ("s3.type", "s3")]));
        assert_eq!(left.unwrap().unwrap().key_id, "");
        let gcs = S3Secret::from_options(&opts(&[
            ("s3.type", "gcs"),
            ("s3.use_ssl", "?"),
            ("s3.name", "g"),
        ]));
        let gcs = gcs.unwrap_err().to_string();
        assert!(
            gcs.contains("secret \"g\" is of type gcs; an s3:// lake needs a secret of type s3"),
            "{gcs}"
        );
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
    fn the_proxy_setting_becomes_a_url_with_its_credentials() {
        let with = |proxy: &str, user: &str, password: &str| S3Secret {
            http_proxy: proxy.into(),
            http_proxy_username: user.into(),
            http_proxy_password: password.into(),
            ..Default::default()
        };
        let url = |s: S3Secret| s.proxy_url("s3://b/x");
        assert_eq!(url(with("", "", "")).unwrap(), None);
        assert_eq!(url(with("  ", "me", "pw")).unwrap(), None);
        // (setting, user, password, the URL the hand-written builder made before `url` did):
        // reqwest parses the proxy URL with `url`, so the same parse is the same proxy
        for (proxy, user, password, before) in [
            ("127.0.0.1:3128", "", "", "http://127.0.0.1:3128"),
            ("proxy", "", "", "http://proxy"),
            (" proxy:3128 ", "", "", "http://proxy:3128"),
            (
                "https://proxy.example:443/",
                "",
                "",
                "https://proxy.example:443",
            ),
            ("http://proxy:3128//", "", "", "http://proxy:3128"),
            ("HTTP://[::1]:3128", "", "", "http://[::1]:3128"),
            ("Proxy.Example:8080", "", "", "http://Proxy.Example:8080"),
            (
                "proxy:3128",
                "me",
                "p@ss:w/rd",
                "http://me:p%40ss%3Aw%2Frd@proxy:3128",
            ),
            ("proxy:3128", "me", "", "http://me:@proxy:3128"),
            (
                "https://proxy:3128",
                "dom\\me",
                "!$&'()*+,;= é%",
                "https://dom%5Cme:%21%24%26%27%28%29%2A%2B%2C%3B%3D%20%C3%A9%25@proxy:3128",
            ),
        ] {
            let got = url(with(proxy, user, password))
                .unwrap_or_else(|e| panic!("{proxy}: {e}"))
                .unwrap();
            assert_eq!(
                Url::parse(&got).unwrap(),
                Url::parse(before).unwrap(),
                "{proxy} {user}"
            );
            // the user name and password as redact() finds them, whatever they hold
            if !user.is_empty() {
                assert!(
                    got.contains(&format!("//{}", percent_encode(user))),
                    "{got}"
                );
            }
            if password.len() >= 4 {
                let shown = with(proxy, user, password).redact(got.clone());
                assert!(!shown.contains(&percent_encode(password)), "{shown}");
                assert!(shown.contains("<redacted>"), "{shown}");
            }
        }
        assert_eq!(
            url(with("proxy:3128", "me", "p@ss:w/rd"))
                .unwrap()
                .as_deref(),
            Some("http://me:p%40ss%3Aw%2Frd@proxy:3128/")
        );
        for bad in [
            "http://",
            "https:///",
            "proxy:3128/path",
            "http://proxy:3128/a/",
            "http://proxy:3128?x=1",
            "http://proxy:3128#top",
            "ftp://proxy:21",
            "socks5://proxy:1080",
            "http://me:proxy-password@proxy:3128",
            "http://@proxy:3128",
            "proxy:port",
            "proxy:99999",
        ] {
            let e = url(with(bad, "", "")).err().unwrap().to_string();
            assert!(
                e.contains("s3://b/x") && e.contains("http_proxy") && !e.contains("  "),
                "{e}"
            );
            assert!(!e.contains("proxy-password"), "{e}");
        }
        let s = with("http://me:proxy-password@proxy:3128", "me", "p@ss word");
        assert!(!format!("{s:?}").contains("proxy-password"));
        let shown = s.redact("via http://me:p%40ss%20word@proxy:3128 and p@ss word".into());
        assert!(
            !shown.contains("p%40ss%20word") && !shown.contains("p@ss word"),
            "{shown}"
        );
    }

    #[test]
    fn user_information_escapes_every_byte_but_the_unreserved_ones() {
        assert_eq!(percent_encode(""), "");
        assert_eq!(
            percent_encode("AZaz09-._~"),
            "AZaz09-._~",
            "unreserved bytes stay"
        );
        assert_eq!(
            percent_encode(" !\"#$%&'()*+,/:;<=>?@[\\]^`{|}"),
            "%20%21%22%23%24%25%26%27%28%29%2A%2B%2C%2F%3A%3B%3C%3D%3E%3F%40%5B%5C%5D%5E%60%7B%7C%7D"
        );
        assert_eq!(percent_encode("é\u{0}\n"), "%C3%A9%00%0A");
    }

    #[test]
    fn a_credential_chain_secret_without_keys_reads_the_aws_variables_only() {
        let chain = S3Secret {
            name: "chain".into(),
            provider: "credential_chain".into(),
            ..Default::default()
        };
        let vars = |n: &str| {
            match n {
                "AWS_ACCESS_KEY_ID" => Some("AKIDENV"),
                "AWS_SECRET_ACCESS_KEY" => Some("env-secret"),
                "AWS_SESSION_TOKEN" => Some("env-token"),
                _ => None,
            }
            .map(String::from)
        };
        let c = chain.credential_from("s3://b/x", vars).unwrap();
        assert_eq!(
            (c.key_id.as_str(), c.secret_key.as_str(), c.token.as_deref()),
            ("AKIDENV", "env-secret", Some("env-token"))
        );
        let e = chain
            .credential_from("s3://b/x", |_| None)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("s3://b/x") && e.contains("AWS_ACCESS_KEY_ID") && e.contains("'chain'"),
            "{e}"
        );
        // keys the secret holds win over the environment, whatever its provider
        let stored = S3Secret {
            key_id: "AKIDSTORED".into(),
            secret: "stored-secret".into(),
            ..chain
        };
        let c = stored.credential_from("s3://b/x", vars).unwrap();
        assert_eq!((c.key_id.as_str(), c.token), ("AKIDSTORED", None));
    }

    #[test]
    fn no_proxy_names_the_hosts_that_skip_the_proxy() {
        assert_eq!(proxy_exclusions(None), Exclusions::Hosts(None));
        assert_eq!(
            proxy_exclusions(Some("127.0.0.1,.example.com".into())),
            Exclusions::Hosts(Some("127.0.0.1,.example.com".into()))
        );
        assert_eq!(
            proxy_exclusions(Some("a.example, * ".into())),
            Exclusions::Everything
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
