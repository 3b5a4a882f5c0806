//! HTTPS (`--tls-cert`, `--tls-key`): rustls, with the PEM files read at
//! start. Handshakes run as tasks of their own, so a client that stalls in
//! one delays nobody else; one not done within [`HANDSHAKE`] is dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, pki_types::pem::PemObject as _};

/// The longest a TLS handshake may take.
const HANDSHAKE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("--tls-cert {path}: {reason}")]
    Cert { path: String, reason: String },
    #[error("--tls-key {path}: {reason}")]
    Key { path: String, reason: String },
    #[error("TLS: {0}")]
    Config(String),
}

/// The acceptor for the certificate chain and key in these PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, TlsError> {
    let certs = rustls::pki_types::CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| TlsError::Cert {
            path: cert.display().to_string(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Cert {
            path: cert.display().to_string(),
            reason: "no certificate in it".into(),
        });
    }
    let key_der =
        rustls::pki_types::PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
            path: key.display().to_string(),
            reason: e.to_string(),
        })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepted connections, handshaken.
pub struct Listener {
    rx: mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
}

impl Listener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> Listener {
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((stream, peer)) = tcp.accept().await else {
                    // Out of file descriptors, say: breathe, then go on.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if tx.is_closed() {
                    return;
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Ok(Ok(tls)) =
                        tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await
                    {
                        let _ = tx.send((tls, peer)).await;
                    }
                });
            }
        });
        Listener { rx }
    }
}

impl Listener {
    /// The next handshaken connection.
    pub async fn next(
        &mut self,
    ) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)> {
        self.rx.recv().await
    }
}
