//! A request's query string and a page's form, as types: each route's
//! parameters are a struct (`deny_unknown_fields`) read by one extractor,
//! [`Query`] for the API (its rejection the API's JSON error, 400 naming
//! the parameter), [`PageQuery`] for a page and [`Form`] for a page's form
//! (their rejection an error page). Query strings and forms are text, so
//! each field is one of the types here: they read a name given once or
//! repeated (the first counts, but for [`Many`]), and refuse a bad value in
//! words the extractor prefixes with the parameter's name. The same
//! structs say which parameters each route takes ([`fields`]), for
//! `params::known`, which refuses any other before the route runs.

use super::error::ApiError;
use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

/// The names `T` takes, as serde hands them to a deserializer (renames
/// applied): asked of `T`'s `Deserialize` with a deserializer that only
/// listens. Written here rather than taken from a crate: the one that does
/// it (serde-aux) brings chrono and more for these twenty lines.
pub fn fields<T: DeserializeOwned>() -> &'static [&'static str] {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Listen(&mut names));
    names
}

/// A deserializer that records the fields of the struct asked of it, and
/// gives nothing.
struct Listen<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for Listen<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("listening"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("listening"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// Pairs as a JSON object: a name given once is a string, given more than
/// once the list of its values.
fn object<'a>(pairs: impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in pairs {
        let v = Value::String(v.into_owned());
        match out.get_mut(k.as_ref()) {
            None => {
                out.insert(k.into_owned(), v);
            }
            Some(Value::Array(all)) => all.push(v),
            Some(first) => *first = Value::Array(vec![first.take(), v]),
        }
    }
    out
}

/// What a query or form is called in a refusal.
#[derive(Clone, Copy)]
enum Kind {
    Query,
    Form,
}

/// `T` read from the pairs of a query string or form: a name `T` does not
/// take, or a bad value, is refused naming it.
fn read<T: DeserializeOwned>(text: &[u8], kind: Kind) -> Result<T, ApiError> {
    if let Some((k, _)) =
        form_urlencoded::parse(text).find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(ApiError::bad_request(format!(
            "`{}` holds a NUL character (U+0000), which wf does not take",
            super::params::shown(&k)
        )));
    }
    let pairs = object(form_urlencoded::parse(text));
    let takes = fields::<T>();
    // A struct that takes any name (a map flattened in) lists none: it
    // checks the names itself.
    if !takes.is_empty()
        && let Some(k) = pairs.keys().find(|k| !takes.contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(match kind {
            Kind::Query => unknown_parameter(k, takes),
            Kind::Form => super::params::unknown_form_field(k),
        }));
    }
    serde_path_to_error::deserialize(Value::Object(pairs)).map_err(|e| {
        let name = super::params::shown(&e.path().to_string());
        let why = e.into_inner().to_string();
        ApiError::bad_request(match why.strip_prefix("is ") {
            Some(_) => format!("`{name}` {why}"),
            None => format!("`{name}`: {why}"),
        })
    })
}

/// The refusal of query parameter `name`, naming those the route takes.
pub fn unknown_parameter(name: &str, takes: &[&str]) -> String {
    let takes = if takes.is_empty() {
        "none".to_string()
    } else {
        takes.join(", ")
    };
    format!(
        "unknown query parameter `{}` (this route takes: {takes})",
        super::params::shown(name)
    )
}

/// An API route's query parameters as its `T`.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or_default();
        read(q.as_bytes(), Kind::Query).map(Query)
    }
}

/// A page's query parameters as its `T`; refused, an error page.
#[derive(Debug)]
pub struct PageQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for PageQuery<T> {
    type Rejection = axum::response::Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let q = parts.uri.query().unwrap_or_default();
        read(q.as_bytes(), Kind::Query)
            .map(PageQuery)
            .map_err(|e| super::pages::error_page(&e))
    }
}

/// A page's form (`application/x-www-form-urlencoded`) as its `T`;
/// refused, an error page.
#[derive(Debug)]
pub struct Form<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequest<S> for Form<T> {
    type Rejection = axum::response::Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        let body = bytes::Bytes::from_request(req, state).await.map_err(|e| {
            super::pages::error_page(&ApiError::bad_request(format!(
                "the form could not be read: {}",
                e.body_text()
            )))
        })?;
        read(&body, Kind::Form)
            .map(Form)
            .map_err(|e| super::pages::error_page(&e))
    }
}

/// Reads a parameter given once or more: the first value, or all of them
/// (`visit`'s `all`).
fn one_or_more<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("text")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(vec![v.to_string()])
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut all = Vec::new();
            while let Some(v) = seq.next_element::<String>()? {
                all.push(v);
            }
            Ok(all)
        }
    }
    d.deserialize_any(V)
}

/// The first value of a parameter.
fn first<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(one_or_more(d)?.into_iter().next().unwrap_or_default())
}

/// A text parameter (the first, if repeated).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(pub String);

impl<'de> serde::Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        first(d).map(Text)
    }
}

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A parameter that may be repeated (`label=a=1&label=b=2`): every value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Many(pub Vec<String>);

impl<'de> serde::Deserialize<'de> for Many {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_or_more(d).map(Many)
    }
}

/// Label filters, `NAME=VALUE`, repeated for all of several
/// (`label=team=infra&label=env=prod`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelFilters(pub Vec<String>);

impl<'de> serde::Deserialize<'de> for LabelFilters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        one_or_more(d).map(LabelFilters)
    }
}

/// A label filter's pattern: a name (letters, digits, `_`, `.`, `-`, 1 to
/// 63), `=`, any value.
pub const LABEL_PATTERN: &str = "^[A-Za-z0-9_.-]{1,63}=";

/// A yes-or-no parameter: `?name=true` (or `1`) yes, `false` (or `0`)
/// no; nothing else, so that the document's schema says exactly what it
/// takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flag(pub bool);

impl<'de> serde::Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = first(d)?;
        match v.as_str() {
            "1" | "true" => Ok(Flag(true)),
            "0" | "false" => Ok(Flag(false)),
            _ => Err(de::Error::custom(format!("is `{v}`: use true or false"))),
        }
    }
}

/// A whole number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole(pub i64);

impl<'de> serde::Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = first(d)?;
        v.parse()
            .map(Whole)
            .map_err(|_| de::Error::custom(format!("is `{v}`: a whole number is needed")))
    }
}

/// A page's `limit`: `default` when not given, else from 1 to `max`
/// (refused otherwise, naming the range).
pub fn limit(given: Option<Whole>, default: usize, max: usize) -> Result<usize, ApiError> {
    match given {
        None => Ok(default),
        Some(Whole(n)) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("`limit` is {n}: from 1 to {max}"))),
    }
}

/// A duration as `wf` writes them (`30s`, `1h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(pub Duration);

impl<'de> serde::Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = first(d)?;
        crate::workflow::duration::parse_request(&v)
            .map(Span)
            .map_err(de::Error::custom)
    }
}

/// A duration's pattern: one or more `<digits><unit>` groups, what
/// `workflow::duration::parse_request` reads.
pub const DURATION_PATTERN: &str = "^([0-9]+(ms|s|m|h|d))+$";

/// The parameter types' OpenAPI schemas: what each reads, as the document
/// tells a client (`serve::openapi`).
mod schemas {
    use super::{DURATION_PATTERN, Flag, LABEL_PATTERN, LabelFilters, Many, Span, Text, Whole};
    use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
    use utoipa::openapi::{RefOr, Schema};

    crate::vocab::schema!(Text, ObjectBuilder::new().schema_type(Type::String).into());
    crate::vocab::schema!(
        Many,
        ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::String))
            .into()
    );
    crate::vocab::schema!(
        LabelFilters,
        ArrayBuilder::new()
            .items(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(LABEL_PATTERN))
                    .examples([serde_json::json!("team=infra")])
            )
            .into()
    );
    crate::vocab::schema!(
        Flag,
        utoipa::openapi::schema::AnyOfBuilder::new()
            .item(ObjectBuilder::new().schema_type(Type::Boolean))
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .enum_values(Some([0, 1])),
            )
            .description(Some("`true` or `false` (or `1`, `0`)"))
            .into()
    );
    crate::vocab::schema!(
        Whole,
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .into()
    );
    crate::vocab::schema!(Span, duration());

    /// A duration as wf writes them.
    pub fn duration() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(DURATION_PATTERN))
            .description(Some(
                "A duration: `250ms`, `30s`, `5m`, `2h`, `3d`, or groups of them (`1h30m`)",
            ))
            .examples([serde_json::json!("1h")])
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Params {
        #[serde(default)]
        status: Option<Text>,
        #[serde(default)]
        label: Many,
        #[serde(default)]
        roots: Flag,
        #[serde(default)]
        limit: Option<Whole>,
        #[serde(default)]
        since: Option<Span>,
        #[serde(default, rename = "as")]
        as_id: Option<Text>,
    }

    fn read_query(q: &str) -> Result<Params, String> {
        read::<Params>(q.as_bytes(), Kind::Query).map_err(|e| e.message)
    }

    #[test]
    fn a_limit_is_its_default_or_within_its_range() {
        assert_eq!(limit(None, 50, 1000).unwrap(), 50);
        assert_eq!(limit(Some(Whole(1000)), 50, 1000).unwrap(), 1000);
        for n in [0, -1, 1001, i64::MIN] {
            assert_eq!(
                limit(Some(Whole(n)), 50, 1000).unwrap_err().message,
                format!("`limit` is {n}: from 1 to 1000")
            );
        }
    }

    #[test]
    fn a_struct_says_the_names_it_takes_renames_included() {
        assert_eq!(
            fields::<Params>(),
            ["status", "label", "roots", "limit", "since", "as"]
        );
    }

    #[test]
    fn values_read_as_their_types_and_repeated_names_as_a_list_or_the_first() {
        let p = read_query(
            "status=failed&status=completed&label=a=1&label=b=2&roots=true&limit=20&since=1h&as=x",
        )
        .expect("read");
        assert_eq!(p.status, Some(Text("failed".into())));
        assert_eq!(p.label, Many(vec!["a=1".into(), "b=2".into()]));
        assert_eq!(p.roots, Flag(true));
        assert_eq!(p.limit, Some(Whole(20)));
        assert_eq!(p.since, Some(Span(Duration::from_secs(3600))));
        assert_eq!(p.as_id, Some(Text("x".into())));
        let none = read_query("").expect("read");
        assert_eq!(
            (none.status, none.label, none.roots),
            (None, Many::default(), Flag(false))
        );
        assert_eq!(read_query("label=a=1").expect("read").label.0, ["a=1"]);
    }

    #[test]
    fn a_bad_value_or_an_unknown_name_is_refused_naming_it() {
        assert_eq!(
            read_query("roots=maybe").unwrap_err(),
            "`roots` is `maybe`: use true or false"
        );
        assert_eq!(
            read_query("limit=ten").unwrap_err(),
            "`limit` is `ten`: a whole number is needed"
        );
        assert!(
            read_query("since=soon")
                .unwrap_err()
                .starts_with("`since`: "),
        );
        assert_eq!(
            read_query("stauts=failed").unwrap_err(),
            "unknown query parameter `stauts` (this route takes: status, label, roots, limit, since, as)"
        );
        assert_eq!(
            read::<Params>(b"reason=x", Kind::Form).unwrap_err().message,
            "unknown form field `reason`"
        );
    }
}
