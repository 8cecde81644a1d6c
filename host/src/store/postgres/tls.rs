//! TLS to PostgreSQL as libpq's parameters mean it, by rustls (ring, the
//! provider the rest of the binary uses; no OpenSSL): `sslmode` `disable`,
//! `prefer`, `require`, `verify-ca`, `verify-full`, with `sslrootcert` (a PEM
//! file of CA certificates, or `system` for the public roots) and
//! `sslcert`/`sslkey` (a client certificate).
//!
//! As libpq: `prefer` and `require` encrypt without checking the server's
//! certificate, unless `sslrootcert` is given, when they check its chain
//! (as `verify-ca`); `verify-ca` checks the chain only; `verify-full` checks
//! the chain and that the certificate names the host connected to.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// `sslmode`, as libpq spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SslMode {
    Disable,
    /// libpq's default: TLS if the server offers it, plaintext otherwise.
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub(crate) fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres is told: it knows whether to ask for TLS and
    /// whether to insist; the checking is ours (`client_config`).
    pub(crate) fn wire(self) -> postgres::config::SslMode {
        match self {
            SslMode::Disable => postgres::config::SslMode::Disable,
            SslMode::Prefer => postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                postgres::config::SslMode::Require
            }
        }
    }
}

/// The TLS parameters of a `--store` URL.
#[derive(Debug, Clone, Default)]
pub(crate) struct TlsParams {
    pub mode: SslMode,
    pub root_cert: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(param: &str, path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{param}: cannot read {path}: {e}"))
}

/// The CA certificates `sslrootcert` names.
fn roots(path: &str) -> Result<RootCertStore, String> {
    if path == "system" {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    }
    let pem = read("sslrootcert", path)?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("sslrootcert: {path} is not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("sslrootcert: a certificate of {path} is not usable: {e}"))?;
    }
    if roots.is_empty() {
        return Err(format!("sslrootcert: {path} holds no certificate"));
    }
    Ok(roots)
}

/// The client certificate (`sslcert`, with its chain) and its key (`sslkey`).
fn client_identity(
    params: &TlsParams,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, String> {
    let (cert, key) = match (&params.cert, &params.key) {
        (None, None) => return Ok(None),
        (Some(cert), Some(key)) => (cert, key),
        (Some(_), None) => return Err("sslcert is given without sslkey".into()),
        (None, Some(_)) => return Err("sslkey is given without sslcert".into()),
    };
    let chain = CertificateDer::pem_slice_iter(&read("sslcert", cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("sslcert: {cert} is not PEM: {e}"))?;
    if chain.is_empty() {
        return Err(format!("sslcert: {cert} holds no certificate"));
    }
    let key = PrivateKeyDer::from_pem_slice(&read("sslkey", key)?)
        .map_err(|e| format!("sslkey: {key} holds no usable private key: {e}"))?;
    Ok(Some((chain, key)))
}

/// The rustls configuration `params` ask for; an `Err` names the parameter
/// at fault.
pub(crate) fn client_config(params: &TlsParams) -> Result<ClientConfig, String> {
    let provider = provider();
    let roots = match (&params.root_cert, params.mode) {
        (Some(path), _) => Some(roots(path)?),
        (None, SslMode::VerifyCa | SslMode::VerifyFull) => {
            return Err(format!(
                "sslmode={} needs sslrootcert: the CA certificate file (PEM), or `system` for the public roots",
                params.mode.name()
            ));
        }
        (None, _) => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match (params.mode, roots) {
        (SslMode::VerifyFull, Some(roots)) => {
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(|e| format!("sslrootcert: {e}"))?
        }
        (_, Some(roots)) => Arc::new(ChainOnly {
            roots,
            provider: provider.clone(),
        }),
        (_, None) => Arc::new(Unchecked {
            provider: provider.clone(),
        }),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    match client_identity(params)? {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("sslcert/sslkey: {e}")),
        None => Ok(builder.with_no_client_auth()),
    }
}

fn check_tls12(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    verify_tls12_signature(
        message,
        cert,
        dss,
        &provider.signature_verification_algorithms,
    )
}

fn check_tls13(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    verify_tls13_signature(
        message,
        cert,
        dss,
        &provider.signature_verification_algorithms,
    )
}

/// `verify-ca` (and `prefer`/`require` with `sslrootcert`): the chain must
/// lead to one of the roots; the name is not checked.
#[derive(Debug)]
struct ChainOnly {
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        check_tls12(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        check_tls13(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `prefer` and `require` without `sslrootcert`: encrypted, but any
/// certificate is taken (libpq's meaning; it does not stop an active
/// attacker, which is what `verify-full` is for). The handshake's
/// signatures are still checked against the certificate presented.
#[derive(Debug)]
struct Unchecked {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        check_tls12(&self.provider, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        check_tls13(&self.provider, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
