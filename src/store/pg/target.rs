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

    /// Parses a URL; the error names the URL without its password.
    pub fn parse(url: &str) -> Result<PgTarget> {
        let fail = |reason: String| StoreError::Open {
            path: strip_password(url),
            reason,
        };
        // tokio-postgres takes three sslmodes; wf takes libpq's six, and
        // sslrootcert, so those two are read here and taken out.
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut tls = Tls::Prefer;
        let mut root_cert = None;
        let mut rest = form_urlencoded::Serializer::new(String::new());
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match &*k {
                "sslmode" => {
                    tls = match &*v {
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
                "sslrootcert" => root_cert = Some(PathBuf::from(&*v)),
                _ => {
                    rest.append_pair(&k, &v);
                }
            }
        }
        let rest = rest.finish();
        let text = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{rest}")
        };
        let mut config = tokio_postgres::Config::from_str(&text)
            .map_err(|e| fail(format!("not a valid PostgreSQL URL: {}", one_line(&e))))?;
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if config.get_hosts().is_empty() {
            match env("PGHOST") {
                Some(h) if h.starts_with('/') => config.host_path(h),
                Some(h) => config.host(&h),
                None if std::path::Path::new("/var/run/postgresql").is_dir() => {
                    config.host_path("/var/run/postgresql")
                }
                None => config.host("localhost"),
            };
        }
        if config.get_ports().is_empty()
            && let Some(p) = env("PGPORT").and_then(|p| p.parse::<u16>().ok())
        {
            config.port(p);
        }
        if config.get_user().is_none() {
            let user = env("PGUSER").unwrap_or_else(os_user);
            config.user(&user);
        }
        if config.get_password().is_none()
            && let Some(p) = env("PGPASSWORD")
        {
            config.password(p);
        }
        if config.get_dbname().is_none() {
            let db = env("PGDATABASE")
                .or_else(|| config.get_user().map(str::to_string))
                .unwrap_or_default();
            config.dbname(&db);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        if config.get_application_name().is_none() {
            config.application_name("wf");
        }
        let schema = std::env::var("WF_PG_SCHEMA").unwrap_or_else(|_| "wf".into());
        let valid = !schema.is_empty()
            && schema.len() <= 63
            && !schema.starts_with(|c: char| c.is_ascii_digit())
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !valid {
            return Err(fail(format!(
                "WF_PG_SCHEMA `{schema}` is not a schema name wf takes: use 1 to 63 lowercase letters, digits and _, not starting with a digit"
            )));
        }
        // Every connection works in the schema, and commits as WF_DURABILITY says.
        let mut options = config.get_options().unwrap_or_default().to_string();
        options.push_str(&format!(" -c search_path={schema}"));
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
        let shown = describe(&config);
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
            &format!("search_path={}", self.schema),
            &format!("search_path={schema}"),
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

/// The URL as messages may show it.
fn strip_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}{tail}")
                .split('?')
                .next()
                .unwrap_or_default()
                .to_string()
        }
        None => format!("{scheme}://{authority}{tail}")
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string(),
    }
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
        assert_eq!(
            strip_password("postgres://wf:s3cret@db:5433/hist?sslmode=require"),
            "postgres://wf@db:5433/hist"
        );
        let t = PgTarget::parse("postgresql://wf:s3cret@db.example:5433/hist").unwrap();
        assert_eq!(t.describe(), "postgres://wf@db.example:5433/hist");
        assert!(!format!("{t:?}").contains("s3cret"));
        let e = PgTarget::parse("postgres://wf:s3cret@db/x?sslmode=sometimes").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("sslmode `sometimes`"), "{e}");
    }
}
