//! How a host reaches PostgreSQL: the `--store` URL read as libpq reads it
//! (tokio-postgres parses most of it; the TLS parameters it does not know,
//! `sslmode=verify-ca|verify-full`, `sslrootcert`, `sslcert`, `sslkey`, are
//! taken out here and given to `tls.rs`), and the one way every connection
//! of the engine is made (the writer's, the listener's, the lease keeper's,
//! the read pool's).

use std::time::Duration;

use r2d2_postgres::PostgresConnectionManager;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::{self, SslMode, TlsParams};
use super::{describe, pg};
use crate::store::StoreError;

/// The TLS connector every connection uses (with `sslmode=disable` it is
/// never asked to do anything).
pub(crate) type Tls = MakeRustlsConnect;

/// Limits the server enforces on every connection of the engine (set as
/// `-c` options when it connects), so a stuck statement or a host stalled
/// inside a transaction cannot hold a session's row locks for ever: the
/// server cancels the statement, or ends the session and rolls its
/// transaction back (the writer's batch fails, 503, and is not half
/// applied). Zero turns one off. Options of the URL's own `options`
/// parameter win. docs/limits.md.
#[derive(Debug, Clone, Copy)]
pub struct StoreTimeouts {
    /// `statement_timeout` (`--store-statement-timeout-secs`): one
    /// statement, waiting for row locks included.
    pub statement: Duration,
    /// `idle_in_transaction_session_timeout`
    /// (`--store-idle-in-transaction-secs`): silence inside a transaction.
    pub idle_in_transaction: Duration,
}

impl Default for StoreTimeouts {
    fn default() -> Self {
        StoreTimeouts {
            statement: Duration::from_secs(30),
            idle_in_transaction: Duration::from_secs(10),
        }
    }
}

impl StoreTimeouts {
    /// The `options` startup parameter: ours, then the URL's own.
    fn options(&self, url_options: Option<&str>) -> String {
        let mut options = format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            self.statement.as_millis(),
            self.idle_in_transaction.as_millis()
        );
        if let Some(own) = url_options.filter(|o| !o.trim().is_empty()) {
            options.push(' ');
            options.push_str(own);
        }
        options
    }
}

/// How long a connection attempt to one server may take, unless the URL
/// says (`connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long sent data may stay unacknowledged before the connection is
/// dropped, unless the URL says (`tcp_user_timeout`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how to connect, read from the `--store` URL.
#[derive(Clone)]
pub(crate) struct Target {
    config: postgres::Config,
    tls: Tls,
    params: TlsParams,
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

impl Target {
    /// Reads `url`; a parameter that is wrong or a file it names that
    /// cannot be read is refused here, naming the parameter.
    pub(crate) fn parse(url: &str, timeouts: StoreTimeouts) -> Result<Target, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut kept = Vec::new();
        let mut params = TlsParams::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            match decode(key).as_str() {
                "sslmode" => {
                    params.mode = SslMode::parse(&value).ok_or_else(|| {
                        StoreError::Rejected(format!(
                            "--store URL: sslmode `{value}` is not one of disable, prefer, require, verify-ca, verify-full"
                        ))
                    })?;
                }
                "sslrootcert" => params.root_cert = Some(value),
                "sslcert" => params.cert = Some(value),
                "sslkey" => params.key = Some(value),
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_string(),
            false => format!("{base}?{}", kept.join("&")),
        };
        let mut config: postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Rejected(format!("invalid --store URL: {e}")))?;
        config.ssl_mode(params.mode.wire());
        let options = timeouts.options(config.get_options());
        config.options(&options);
        // A server whose machine vanished (no TCP reset) is given up on in
        // seconds, not the kernel's minutes: the next of a multi-host URL
        // is tried, or the call fails with 503 and is tried again.
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        let rustls = tls::client_config(&params)
            .map_err(|e| StoreError::Rejected(format!("--store URL: {e}")))?;
        Ok(Target {
            config,
            tls: MakeRustlsConnect::new(rustls),
            params,
        })
    }

    /// A new connection.
    pub(crate) fn connect(&self) -> Result<postgres::Client, postgres::Error> {
        self.config.connect(self.tls.clone())
    }

    /// The read pool's connection manager.
    pub(crate) fn manager(&self) -> PostgresConnectionManager<Tls> {
        PostgresConnectionManager::new(self.config.clone(), self.tls.clone())
    }

    /// The error of the first connection at start, naming the TLS
    /// parameters in force (a failed handshake, a plaintext server under
    /// `require`, a certificate that does not verify).
    pub(crate) fn startup_error(&self, err: &postgres::Error) -> StoreError {
        let TlsParams {
            mode, root_cert, ..
        } = &self.params;
        if *mode == SslMode::Disable {
            return pg(err);
        }
        let root = match root_cert {
            Some(path) => format!(", sslrootcert={path}"),
            None => String::new(),
        };
        StoreError::Unavailable(format!(
            "cannot connect with sslmode={}{root}: {}",
            mode.name(),
            describe(err)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_parameters_are_taken_out_and_the_rest_passed_on() {
        let target = Target::parse(
            "postgres://u@h1:5433,h2:5434/db?sslmode=require&target_session_attrs=read-write&application_name=a%20b&options=-c%20statement_timeout%3D5s",
            StoreTimeouts::default(),
        )
        .unwrap();
        assert_eq!(target.params.mode, SslMode::Require);
        assert_eq!(
            target.config.get_ssl_mode(),
            postgres::config::SslMode::Require
        );
        assert_eq!(target.config.get_ports(), [5433, 5434]);
        assert_eq!(target.config.get_application_name(), Some("a b"));
        // Our timeouts first: the URL's own options win.
        assert_eq!(
            target.config.get_options(),
            Some(
                "-c statement_timeout=30000 -c idle_in_transaction_session_timeout=10000 -c statement_timeout=5s"
            )
        );
        assert_eq!(
            target.config.get_target_session_attrs(),
            postgres::config::TargetSessionAttrs::ReadWrite
        );
        // libpq's default.
        let target = Target::parse("postgres://u@h/db", StoreTimeouts::default()).unwrap();
        assert_eq!(target.params.mode, SslMode::Prefer);
    }

    #[test]
    fn every_connection_has_the_timeouts_and_the_urls_own_options_win() {
        let url = crate::store::pg_cluster::database("connect_timeouts");
        let timeouts = StoreTimeouts {
            statement: Duration::from_secs(3),
            idle_in_transaction: Duration::from_secs(4),
        };
        let show = |target: &Target, setting: &str| -> String {
            let mut client = target.connect().unwrap();
            client
                .query_one(&format!("SHOW {setting}"), &[])
                .unwrap()
                .get(0)
        };
        let target = Target::parse(&url, timeouts).unwrap();
        assert_eq!(show(&target, "statement_timeout"), "3s");
        assert_eq!(show(&target, "idle_in_transaction_session_timeout"), "4s");
        let pool = r2d2::Pool::builder()
            .max_size(1)
            .build(target.manager())
            .unwrap();
        let mut pooled = pool.get().unwrap();
        let row = pooled.query_one("SHOW statement_timeout", &[]).unwrap();
        assert_eq!(row.get::<_, String>(0), "3s");
        // A statement over it is cancelled by the server.
        let err = pooled.simple_query("SELECT pg_sleep(10)").unwrap_err();
        assert_eq!(
            err.code(),
            Some(&postgres::error::SqlState::QUERY_CANCELED),
            "{err}"
        );
        let own = Target::parse(
            &format!("{url}?options=-c%20statement_timeout%3D7s"),
            timeouts,
        )
        .unwrap();
        assert_eq!(show(&own, "statement_timeout"), "7s");
        assert_eq!(show(&own, "idle_in_transaction_session_timeout"), "4s");
    }

    #[test]
    fn a_wrong_tls_parameter_is_refused_naming_it() {
        let err = |url: &str| match Target::parse(url, StoreTimeouts::default()) {
            Ok(_) => panic!("{url} was taken"),
            Err(err) => err.to_string(),
        };
        assert!(err("postgres://u@h/db?sslmode=verify-fully").contains("sslmode"));
        assert!(err("postgres://u@h/db?sslmode=verify-full").contains("needs sslrootcert"));
        assert!(err("postgres://u@h/db?sslmode=verify-ca").contains("needs sslrootcert"));
        assert!(
            err("postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
                .contains("sslrootcert: cannot read /nonexistent/ca.pem")
        );
        assert!(err("postgres://u@h/db?sslmode=require&sslcert=/x.pem").contains("sslkey"));
        // `system`: the public roots, no file.
        assert!(
            Target::parse(
                "postgres://u@h/db?sslmode=verify-full&sslrootcert=system",
                StoreTimeouts::default()
            )
            .is_ok()
        );
    }
}
