//! `postgres://` URLs read as libpq reads them:
//! `postgres[ql]://[USER[:PASSWORD]@][HOST[:PORT][,…]][/DATABASE][?NAME=VALUE[&…]]`,
//! every part percent-decoded once (`%40` is `@`, `%25` is `%`, and a `+`
//! stays a `+`: a query is not a form). The user information ends at the
//! first `@` before any `/`, so a password may hold `?` as it is, and `@`,
//! `/`, `:` or `%` percent-encoded.
//!
//! An error never quotes the URL, nor any part of it: a part that does not
//! parse may be a piece of a password that was not percent-encoded.

use percent_encoding::percent_decode_str;

/// The parts of a URL, decoded.
#[derive(Debug, Default, PartialEq)]
pub(super) struct PgUrl {
    pub user: Option<String>,
    /// Bytes: a password need not be UTF-8.
    pub password: Option<Vec<u8>>,
    /// Each host (a name, an address, or a Unix socket folder when it starts
    /// with `/`) with its port, if the URL gives one.
    pub hosts: Vec<(String, Option<u16>)>,
    pub dbname: Option<String>,
    /// The query's parameters, in order, as given (decoded).
    pub params: Vec<(String, String)>,
}

const ENCODE: &str = "percent-encode `@`, `/`, `?`, `:` and `%` in a user name or password (%40, %2F, %3F, %3A, %25)";

/// Parses `url` (which starts with `postgres://` or `postgresql://`, in any
/// case); the error says what is wrong without quoting the URL.
pub(super) fn parse(url: &str) -> Result<PgUrl, String> {
    let rest = ["postgresql://", "postgres://"]
        .iter()
        .find_map(|scheme| {
            url.get(..scheme.len())
                .filter(|s| s.eq_ignore_ascii_case(scheme))
                .map(|_| &url[scheme.len()..])
        })
        .ok_or("a PostgreSQL URL starts with postgres:// or postgresql://")?;
    let mut out = PgUrl::default();

    // USER[:PASSWORD]@, up to the first `@` before any `/` (libpq's rule).
    let rest = match rest.find(['@', '/']) {
        Some(at) if rest[at..].starts_with('@') => {
            let (user, password) = match rest[..at].split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (&rest[..at], None),
            };
            let user = text(user, "the user name")?;
            out.user = (!user.is_empty()).then_some(user);
            out.password = password.map(bytes).transpose()?;
            &rest[at + 1..]
        }
        _ => rest,
    };

    // HOST[:PORT][,…], up to the path or the query.
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (hosts, rest) = rest.split_at(end);
    if hosts.contains('@') {
        return Err(format!("an `@` after the user information: {ENCODE}"));
    }
    if !hosts.is_empty() {
        for chunk in hosts.split(',') {
            let (host, port) = match chunk.strip_prefix('[') {
                Some(v6) => {
                    let (host, after) = v6
                        .split_once(']')
                        .ok_or("an IPv6 host is missing its closing `]`")?;
                    match after {
                        "" => (host, None),
                        _ => match after.strip_prefix(':') {
                            Some(port) => (host, Some(port)),
                            None => return Err("text after an IPv6 host's `]`".into()),
                        },
                    }
                }
                None => match chunk.split_once(':') {
                    Some((host, port)) => (host, Some(port)),
                    None => (chunk, None),
                },
            };
            let port = match port {
                None | Some("") => None,
                Some(p) => Some(port_number(&text(p, "a port")?)?),
            };
            out.hosts.push((text(host, "a host")?, port));
        }
    }

    // /DATABASE, up to the query.
    let rest = match rest.strip_prefix('/') {
        Some(path) => {
            let end = path.find('?').unwrap_or(path.len());
            if path[..end].contains('@') {
                return Err(format!("an `@` after the host: {ENCODE}"));
            }
            let db = text(&path[..end], "the database name")?;
            out.dbname = (!db.is_empty()).then_some(db);
            &path[end..]
        }
        None => rest,
    };

    // ?NAME=VALUE&…
    if let Some(query) = rest.strip_prefix('?') {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or("a URL parameter without `=` (NAME=VALUE)")?;
            let name = text(name, "a parameter name")?;
            let value = text(value, "a parameter value")?;
            out.params.push((name, value));
        }
    }
    Ok(out)
}

/// A port: 1 to 65535.
pub(super) fn port_number(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err("a port is not a number from 1 to 65535".into()),
    }
}

/// `%XX` escapes decoded; a `%` not followed by two hex digits is refused
/// (as libpq does).
fn bytes(part: &str) -> Result<Vec<u8>, String> {
    let raw = part.as_bytes();
    for (i, _) in part.match_indices('%') {
        let hex = raw.get(i + 1..i + 3).unwrap_or_default();
        if hex.len() != 2 || !hex.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!(
                "a `%` in the URL is not followed by two hex digits: {ENCODE}"
            ));
        }
    }
    Ok(percent_decode_str(part).collect())
}

/// [`bytes`] that must be UTF-8 text (`what` names the part).
fn text(part: &str, what: &str) -> Result<String, String> {
    String::from_utf8(bytes(part)?).map_err(|_| format!("{what} in the URL is not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(url: &str) -> PgUrl {
        parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    #[test]
    fn every_part_is_percent_decoded_once() {
        let u = ok(
            "postgres://w%66:s3cr%3Ft@db.example:5433/hist%2Fx?sslmode=require&options=-c%20statement_timeout%3D5&application_name=a+b",
        );
        assert_eq!(u.user.as_deref(), Some("wf"));
        assert_eq!(u.password.as_deref(), Some(&b"s3cr?t"[..]));
        assert_eq!(u.hosts, [("db.example".to_string(), Some(5433))]);
        assert_eq!(u.dbname.as_deref(), Some("hist/x"));
        assert_eq!(
            u.params,
            [
                ("sslmode".to_string(), "require".to_string()),
                ("options".to_string(), "-c statement_timeout=5".to_string()),
                ("application_name".to_string(), "a+b".to_string()),
            ]
        );
        for (url, password) in [
            ("postgres://u:p%40ss@h/d", "p@ss"),
            ("postgres://u:p%2525w@h/d", "p%25w"),
            ("postgres://u:p%25w@h/d", "p%w"),
            ("postgres://u:a%2Fb%3Ac@h/d", "a/b:c"),
            // `?` and `:` need no escape in a password (libpq's rule).
            ("postgres://u:s3cr?t@h/d", "s3cr?t"),
            ("postgres://u:a:b@h/d", "a:b"),
            ("postgres://u:@h/d", ""),
        ] {
            assert_eq!(
                ok(url).password.as_deref(),
                Some(password.as_bytes()),
                "{url}"
            );
        }
    }

    #[test]
    fn hosts_sockets_and_defaults() {
        assert_eq!(ok("postgresql://"), PgUrl::default());
        assert_eq!(ok("POSTGRES://h").hosts, [("h".to_string(), None)]);
        let u = ok("postgres://%2Ftmp%2Fpg:5999/db");
        assert_eq!(u.hosts, [("/tmp/pg".to_string(), Some(5999))]);
        let u = ok("postgres://a:1,[::1]:2,[fe80::1]/db?host=%2Fs");
        assert_eq!(
            u.hosts,
            [
                ("a".to_string(), Some(1)),
                ("::1".to_string(), Some(2)),
                ("fe80::1".to_string(), None)
            ]
        );
        assert_eq!(u.params, [("host".to_string(), "/s".to_string())]);
        let u = ok("postgres:///db?host=/var/run/postgresql");
        assert!(u.hosts.is_empty() && u.user.is_none());
    }

    #[test]
    fn errors_never_quote_the_url() {
        for (url, says) in [
            ("postgres://u:p@ss@h/d", "an `@` after the user information"),
            ("postgres://u:1234/x@h/d", "an `@` after the host"),
            ("postgres://u:sec/ret@h/d", "a port is not a number"),
            ("postgres://u:p%zzw@h/d", "not followed by two hex digits"),
            ("postgres://u:p%w@h/d", "not followed by two hex digits"),
            ("postgres://u:secret@h:99999/d", "a port is not a number"),
            ("postgres://u:secret@[::1/d", "closing `]`"),
            ("postgres://u:secret@h/d?secretkey", "without `=`"),
            ("postgres://u%ff:secret@h/d", "not UTF-8"),
            ("mysql://u:secret@h/d", "starts with postgres://"),
        ] {
            let e = parse(url).expect_err(url);
            assert!(e.contains(says), "{url}: {e}");
            for piece in ["secret", "ss@", "sec", "ret", "1234", "p%", "zz"] {
                assert!(!e.contains(piece), "{url}: {e}");
            }
        }
    }
}
