//! Where a PostgreSQL history lives: the `postgres://` URL of `--db`/`WF_DB`
//! (with libpq's `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`
//! filling what it leaves out), its TLS mode, and the schema (`WF_PG_SCHEMA`,
//! default `wf`). The password is kept for the connection and never shown:
//! messages name the database as `postgres://user@host:port/db`.

use crate::store::{Result, StoreError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject};
use rustls::{DigitallySignedStruct, SignatureScheme};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};

/// libpq's `sslmode`, all six of them (tokio-postgres knows three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

#[derive(Clone)]
pub struct PgTarget {
    pub(super) config: tokio_postgres::Config,
    tls: Tls,
    root_cert: Option<PathBuf>,
    pub(super) schema: String,
    shown: String,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PgTarget {
    pub fn is_url(text: &str) -> bool {
        let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
        lower.starts_with("postgres://") || lower.starts_with("postgresql://")
    }

    /// Parses a URL (see `url`); the error names the URL without its
    /// password.
    pub fn parse(url: &str) -> Result<PgTarget> {
        let parts = super::url::parse(url).map_err(|reason| StoreError::Open {
            path: hidden(url),
            reason: format!("not a valid PostgreSQL URL: {reason}"),
        })?;
        let mut shown = Shown {
            user: parts.user.clone(),
            host: parts.hosts.first().cloned(),
            dbname: parts.dbname.clone(),
        };
        let (mut user, mut password, mut dbname) = (parts.user, parts.password, parts.dbname);
        let mut hosts: Vec<String> = parts.hosts.iter().map(|(h, _)| h.clone()).collect();
        let mut ports: Vec<Option<u16>> = parts.hosts.iter().map(|(_, p)| *p).collect();
        // wf reads libpq's six sslmodes and sslrootcert, and (as libpq)
        // the parameters that name what the URL's parts name; every other
        // parameter goes to tokio-postgres as it was given.
        let mut tls = Tls::Prefer;
        let mut root_cert = None;
        let mut given = String::new();
        for (k, v) in parts.params {
            let fail = |reason: String| StoreError::Open {
                path: shown.text(),
                reason,
            };
            match k.as_str() {
                "sslmode" => {
                    tls = match v.as_str() {
                        "disable" => Tls::Disable,
                        "allow" => Tls::Allow,
                        "prefer" => Tls::Prefer,
                        "require" => Tls::Require,
                        "verify-ca" => Tls::VerifyCa,
                        "verify-full" => Tls::VerifyFull,
                        other => {
                            return Err(fail(format!(
                                "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                            )));
                        }
                    }
                }
                "sslrootcert" => root_cert = Some(PathBuf::from(v)),
                "user" => user = Some(v),
                "password" => password = Some(v.into_bytes()),
                "dbname" => dbname = Some(v),
                "host" => hosts = v.split(',').map(str::to_string).collect(),
                "port" => {
                    ports = v
                        .split(',')
                        .map(|p| match p {
                            "" => Ok(None),
                            p => super::url::port_number(p).map(Some),
                        })
                        .collect::<std::result::Result<_, _>>()
                        .map_err(fail)?;
                }
                name if name.is_empty()
                    || name.contains(|c: char| c.is_whitespace() || c == '=' || c == '\'') =>
                {
                    return Err(fail("a URL parameter's name is not a word".into()));
                }
                name => {
                    // tokio-postgres's `key='value'` form, which takes any
                    // value (a backslash escapes a quote or a backslash).
                    let value = v.replace('\\', "\\\\").replace('\'', "\\'");
                    given.push_str(&format!("{name}='{value}' "));
                }
            }
        }
        shown.user = user.clone();
        shown.dbname = dbname.clone();
        let fail = |reason: String| StoreError::Open {
            path: shown.text(),
            reason,
        };
        let mut config = if given.is_empty() {
            tokio_postgres::Config::new()
        } else {
            tokio_postgres::Config::from_str(&given)
                .map_err(|e| fail(format!("not a valid PostgreSQL URL: {}", one_line(&e))))?
        };
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        hosts.retain(|h| !h.is_empty());
        if hosts.is_empty() {
            hosts.push(match env("PGHOST") {
                Some(h) => h,
                None if std::path::Path::new("/var/run/postgresql").is_dir() => {
                    "/var/run/postgresql".into()
                }
                None => "localhost".into(),
            });
        }
        for h in &hosts {
            if h.starts_with('/') {
                config.host_path(h);
            } else {
                config.host(h);
            }
        }
        // A port per host, or one for all; what is missing is PGPORT's, or
        // 5432.
        let default_port = env("PGPORT")
            .and_then(|p| super::url::port_number(&p).ok())
            .unwrap_or(5432);
        if ports.len() > 1 || ports.iter().any(Option::is_some) {
            for p in &ports {
                config.port(p.unwrap_or(default_port));
            }
        } else {
            config.port(default_port);
        }
        match user {
            Some(u) => config.user(&u),
            None => config.user(env("PGUSER").unwrap_or_else(os_user)),
        };
        match password.or_else(|| env("PGPASSWORD").map(String::into_bytes)) {
            Some(p) => config.password(p),
            None => &mut config,
        };
        let db = dbname
            .or_else(|| env("PGDATABASE"))
            .or_else(|| config.get_user().map(str::to_string))
            .unwrap_or_default();
        config.dbname(&db);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("wf");
        }
        // A server that stops answering without closing the connection (a
        // partition that drops packets) is noticed by the socket too, as
        // well as by each call's deadline (`conn`): keepalive probes once
        // it is idle for a third of a call's deadline, and a TCP user
        // timeout of two thirds of it, after which the kernel gives up on
        // data the server never acknowledged, so that a request wf sends
        // again on a new connection is never also delivered late on the old
        // one. Parameters of the URL that set them win.
        if let Some(why) = super::conn::unreadable_var() {
            return Err(fail(why));
        }
        let said = |key: &str| given.contains(&format!("{key}='"));
        let deadline = super::conn::call_deadline();
        let second = Duration::from_secs(1);
        if !said("keepalives_idle") {
            config.keepalives_idle((deadline / 3).max(second));
        }
        if !said("keepalives_interval") {
            config.keepalives_interval((deadline / 10).max(second));
        }
        if !said("keepalives_retries") {
            config.keepalives_retries(3);
        }
        if !said("tcp_user_timeout") {
            config.tcp_user_timeout((deadline * 2 / 3).max(second));
        }
        // libpq ignores sslmode over Unix-domain sockets (PostgreSQL has no
        // TLS there).
        if !config.get_hosts().is_empty()
            && config.get_hostaddrs().is_empty()
            && config
                .get_hosts()
                .iter()
                .all(|h| matches!(h, Host::Unix(_)))
        {
            tls = Tls::Disable;
        }
        let shown = describe(&config);
        let fail = |reason: String| StoreError::Open {
            path: shown.clone(),
            reason,
        };
        let schema = std::env::var("WF_PG_SCHEMA")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "wf".into());
        check_schema(&schema).map_err(fail)?;
        // Every connection works in the schema, and commits as WF_DURABILITY says.
        let mut options = config.get_options().unwrap_or_default().to_string();
        options.push_str(&format!(" -c search_path={}", quoted(&schema)));
        // A runner stalled inside a transaction (SIGSTOP, a paused VM) holds
        // its instance's row lock: the server ends such a session after the
        // lease TTL, so that another runner can take the instance over.
        let ttl = std::env::var("WF_LEASE_TTL")
            .ok()
            .and_then(|t| crate::workflow::duration::parse(t.trim()).ok())
            .unwrap_or(Duration::from_secs(30));
        options.push_str(&format!(
            " -c idle_in_transaction_session_timeout={}",
            ttl.as_millis().max(1000)
        ));
        if crate::store::Durability::from_env() == crate::store::Durability::Normal {
            options.push_str(" -c synchronous_commit=off");
        }
        config.options(options.trim());
        config.ssl_mode(match tls {
            Tls::Disable => SslMode::Disable,
            Tls::Allow | Tls::Prefer => SslMode::Prefer,
            _ => SslMode::Require,
        });
        Ok(PgTarget {
            config,
            tls,
            root_cert,
            schema,
            shown,
        })
    }

    /// The same server and settings, in another schema (tests, which may
    /// not set `WF_PG_SCHEMA` for the whole test binary).
    #[cfg(test)]
    pub(super) fn in_schema(mut self, schema: &str) -> PgTarget {
        let options = self.config.get_options().unwrap_or_default().replace(
            &format!("search_path={}", quoted(&self.schema)),
            &format!("search_path={}", quoted(schema)),
        );
        self.config.options(&options);
        self.schema = schema.to_string();
        self
    }

    /// `postgres://user@host:port/db`, never the password.
    pub fn describe(&self) -> String {
        self.shown.clone()
    }

    /// The TLS connector for this target's sslmode.
    pub(super) fn connector(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect> {
        let fail = |reason: String| StoreError::Open {
            path: self.describe(),
            reason,
        };
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let roots = match &self.root_cert {
            // (No TLS: over a Unix socket, sslrootcert is ignored too.)
            _ if self.tls == Tls::Disable => None,
            None => None,
            Some(path) => {
                let mut roots = rustls::RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| fail(format!("sslrootcert {}: {e}", path.display())))?;
                for cert in certs {
                    let cert =
                        cert.map_err(|e| fail(format!("sslrootcert {}: {e}", path.display())))?;
                    roots
                        .add(cert)
                        .map_err(|e| fail(format!("sslrootcert {}: {e}", path.display())))?;
                }
                Some(Arc::new(roots))
            }
        };
        let webpki = |roots: Arc<rustls::RootCertStore>| {
            rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| fail(format!("sslrootcert: {e}")))
        };
        // libpq: `require` with a root certificate verifies like `verify-ca`.
        let verifier: Arc<dyn ServerCertVerifier> = match (self.tls, roots) {
            (Tls::VerifyFull, Some(roots)) => webpki(roots)?,
            (Tls::VerifyFull, None) => Arc::new(
                rustls_platform_verifier::Verifier::new(provider.clone())
                    .map_err(|e| fail(format!("system certificates: {e}")))?,
            ),
            (Tls::VerifyCa | Tls::Require, Some(roots)) => Arc::new(AnyName(webpki(roots)?)),
            (Tls::VerifyCa, None) => {
                return Err(fail(
                    "sslmode=verify-ca needs sslrootcert=FILE (the CA to check against)".into(),
                ));
            }
            _ => Arc::new(Unverified(provider.clone())),
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| fail(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
    }
}

/// How an error names a URL that did not parse: its scheme alone, since
/// any other part may hold a piece of a password that was not
/// percent-encoded.
fn hidden(url: &str) -> String {
    let scheme = url
        .split("://")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    format!("{scheme}://…")
}

/// What an error names before the configuration is whole: the URL's user,
/// first host and database (never its password).
struct Shown {
    user: Option<String>,
    host: Option<(String, Option<u16>)>,
    dbname: Option<String>,
}

impl Shown {
    fn text(&self) -> String {
        let (host, port) = match &self.host {
            Some((h, p)) if h.contains(':') => (format!("[{h}]"), *p),
            Some((h, p)) => (h.clone(), *p),
            None => (String::new(), None),
        };
        format!(
            "postgres://{}@{host}{}/{}",
            self.user.as_deref().unwrap_or_default(),
            port.map(|p| format!(":{p}")).unwrap_or_default(),
            self.dbname.as_deref().unwrap_or_default()
        )
    }
}

/// The longest schema name: wf's notification channel is `wf_<schema>`,
/// and PostgreSQL's names hold at most 63 bytes (longer ones are cut, and
/// `pg_notify` refuses them).
const SCHEMA_MAX: usize = 63 - "wf_".len();

/// Whether wf takes `schema` as `WF_PG_SCHEMA`: lowercase letters, digits
/// and `_`, not starting with a digit, at most [`SCHEMA_MAX`] bytes, and not
/// one of PostgreSQL's own. SQL keywords (`select`, `user`) are fine: wf
/// quotes the name wherever it writes it.
fn check_schema(schema: &str) -> std::result::Result<(), String> {
    let word = !schema.is_empty()
        && schema.len() <= SCHEMA_MAX
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && schema
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    let shown: String = schema
        .chars()
        .take(80)
        .collect::<String>()
        .escape_default()
        .to_string();
    if !word {
        return Err(format!(
            "WF_PG_SCHEMA `{shown}` is not a schema name wf takes: use 1 to {SCHEMA_MAX} lowercase letters, digits and _, not starting with a digit"
        ));
    }
    if schema.starts_with("pg_") || schema == "information_schema" {
        return Err(format!(
            "WF_PG_SCHEMA `{schema}` is one of PostgreSQL's own schemas (pg_*, information_schema): name another"
        ));
    }
    Ok(())
}

/// `schema` as a quoted SQL identifier (a checked name holds no `"`).
pub(super) fn quoted(schema: &str) -> String {
    format!("\"{schema}\"")
}

fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) if h.contains(':') => format!("[{h}]"),
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or_default(),
        config.get_dbname().unwrap_or_default()
    )
}

fn os_user() -> String {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| "postgres".into())
}

/// An error's text and causes, on one line.
pub(super) fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `prefer`/`require` without a root certificate: encrypted, not verified
/// (what libpq does). The handshake signatures are still checked.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to the root certificate; the name need
/// not match the host.
#[derive(Debug)]
struct AnyName(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        use rustls::{CertificateError, Error};
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        let t = PgTarget::parse("postgresql://wf:s3cret@db.example:5433/hist").unwrap();
        assert_eq!(t.describe(), "postgres://wf@db.example:5433/hist");
        assert!(!format!("{t:?}").contains("s3cret"));
        let e = PgTarget::parse("postgres://wf:s3cret@db/x?sslmode=sometimes").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("sslmode `sometimes`"), "{e}");
        assert!(e.to_string().contains("postgres://wf@db/x"), "{e}");
        let e = PgTarget::parse("postgres://wf:s3c@ret@db/x").unwrap_err();
        assert_eq!(
            e.to_string().split(':').take(2).collect::<Vec<_>>(),
            ["database postgres", "//…"]
        );
        assert!(!e.to_string().contains("ret"), "{e}");
    }

    #[test]
    fn parameters_are_passed_as_given() {
        let t = PgTarget::parse(
            "postgres://wf@h/d?options=-c%20statement_timeout%3D5&application_name=a+b%27c\\&connect_timeout=3",
        )
        .unwrap();
        assert!(
            t.config
                .get_options()
                .unwrap()
                .starts_with("-c statement_timeout=5 -c search_path="),
            "{:?}",
            t.config.get_options()
        );
        assert_eq!(t.config.get_application_name(), Some("a+b'c\\"));
        assert_eq!(
            t.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        let e = PgTarget::parse("postgres://wf@h/d?no_such_thing=1").unwrap_err();
        assert!(e.to_string().contains("no_such_thing"), "{e}");
    }

    #[test]
    fn sslmode_is_ignored_over_unix_sockets() {
        let t = PgTarget::parse("postgres://wf@%2Ftmp%2Fsock/d?sslmode=verify-ca").unwrap();
        assert_eq!(t.tls, Tls::Disable);
        let t = PgTarget::parse("postgres://wf@/d?host=/tmp/sock&sslmode=require").unwrap();
        assert_eq!(t.tls, Tls::Disable);
        let t = PgTarget::parse("postgres://wf@h/d?sslmode=require").unwrap();
        assert_eq!(t.tls, Tls::Require);
    }

    #[test]
    fn schema_names() {
        for ok in ["wf", "select", "user", "a_1", &"s".repeat(SCHEMA_MAX)] {
            assert_eq!(check_schema(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "1a",
            "Wf",
            "a-b",
            "a\"b",
            &"s".repeat(SCHEMA_MAX + 1),
            "pg_catalog",
            "pg_toast",
            "pg_x",
            "information_schema",
        ] {
            let e = check_schema(bad).expect_err(bad);
            assert!(e.starts_with("WF_PG_SCHEMA"), "{e}");
        }
    }
}
