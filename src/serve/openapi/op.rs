//! An operation of the document, built from the types its handler takes
//! and answers with ([`Op`]), and the statuses every route shares.

use crate::vocab::TokenScope;
use axum::http::Method;
use serde_json::Value;
use std::collections::BTreeMap;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, Header, Ref, RefOr, Required, Schema};
use utoipa::{IntoParams, ToSchema};

/// The named schemas an operation refers to, gathered into the
/// document's components.
pub type Schemas = Vec<(String, RefOr<Schema>)>;

/// Adds `T`'s schema, and those it refers to, to `out`.
fn collect<T: ToSchema>(out: &mut Schemas) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

/// A reference to `T`'s schema among the components.
pub fn refer<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// An array of `T`.
pub fn array<T: ToSchema>() -> RefOr<Schema> {
    ArrayBuilder::new().items(refer::<T>()).into()
}

/// What an answer holds.
struct Content {
    media: &'static str,
    schema: RefOr<Schema>,
    example: Option<Value>,
}

/// One status an operation answers with.
struct Answer {
    description: String,
    content: Vec<Content>,
    headers: Vec<(&'static str, &'static str)>,
    links: Vec<LinkTo>,
}

/// A link from an answer: its name, the operation it leads to, that
/// operation's parameters and body, each from the answer.
struct LinkTo {
    name: &'static str,
    to: &'static str,
    params: Vec<(&'static str, &'static str)>,
    body: Option<Value>,
}

/// An operation's body: its schema, media type and example, whether it
/// is required, and what it is.
struct BodyOf {
    schema: RefOr<Schema>,
    media: &'static str,
    example: Option<Value>,
    required: bool,
    what: &'static str,
}

/// An operation: a method on a path, with what it takes and answers.
pub struct Op {
    method: Method,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    description: Option<&'static str>,
    token: bool,
    /// Whether the server's request timeout bounds it (408 past 30 s):
    /// all but the routes that wait or stream on purpose.
    bounded: bool,
    params: Vec<Parameter>,
    body: Option<BodyOf>,
    answers: BTreeMap<u16, Answer>,
    schemas: Vec<fn(&mut Schemas)>,
}

impl Op {
    fn new(method: Method, path: &'static str, id: &'static str, summary: &'static str) -> Op {
        Op {
            method,
            path,
            id,
            summary,
            description: None,
            token: true,
            bounded: true,
            params: Vec::new(),
            body: None,
            answers: BTreeMap::new(),
            schemas: Vec::new(),
        }
    }

    pub fn get(path: &'static str, id: &'static str, summary: &'static str) -> Op {
        Op::new(Method::GET, path, id, summary)
    }

    pub fn post(path: &'static str, id: &'static str, summary: &'static str) -> Op {
        Op::new(Method::POST, path, id, summary)
    }

    pub fn delete(path: &'static str, id: &'static str, summary: &'static str) -> Op {
        Op::new(Method::DELETE, path, id, summary)
    }

    /// Said at length, below the summary.
    pub fn describe(mut self, text: &'static str) -> Op {
        self.description = Some(text);
        self
    }

    /// Authenticated by something else than the token (none, a webhook's
    /// signature).
    pub fn open(mut self) -> Op {
        self.token = false;
        self
    }

    /// Not bounded by the request timeout: it waits, streams or moves a
    /// whole history as long as that takes.
    pub fn unbounded(mut self) -> Op {
        self.bounded = false;
        self
    }

    /// Path parameter `name`, of `T`'s schema.
    pub fn path_param<T: ToSchema>(mut self, name: &'static str, what: &'static str) -> Op {
        self.schemas.push(collect::<T>);
        self.path_schema(name, what, refer::<T>())
    }

    /// Path parameter `name`, of `schema`.
    pub fn path_schema(
        mut self,
        name: &'static str,
        what: &'static str,
        schema: RefOr<Schema>,
    ) -> Op {
        self.params.push(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some(what))
                .schema(Some(schema))
                .build(),
        );
        self
    }

    /// The query parameters of `P`, the struct the handler reads them
    /// into; a value they refuse is a 400.
    pub fn query<P: IntoParams>(mut self) -> Op {
        self.params
            .extend(P::into_params(|| Some(ParameterIn::Query)));
        self
    }

    /// The JSON body `B` (required: `false` when an empty body is `{}`).
    pub fn body<B: ToSchema>(mut self, what: &'static str, example: Value, required: bool) -> Op {
        self.body = Some(BodyOf {
            schema: refer::<B>(),
            media: "application/json",
            example: Some(example),
            required,
            what,
        });
        self.schemas.push(collect::<B>);
        self
    }

    /// The JSON body `B`, with the constraints `and` adds to its schema
    /// (`allOf`): what a struct's fields cannot say alone.
    pub fn body_and<B: ToSchema>(
        mut self,
        what: &'static str,
        example: Value,
        and: RefOr<Schema>,
    ) -> Op {
        let schema = utoipa::openapi::schema::AllOfBuilder::new()
            .item(refer::<B>())
            .item(and)
            .into();
        self.body = Some(BodyOf {
            schema,
            media: "application/json",
            example: Some(example),
            required: true,
            what,
        });
        self.schemas.push(collect::<B>);
        self
    }

    /// A body that is not JSON: `media`, any bytes.
    pub fn raw_body(mut self, media: &'static str, required: bool) -> Op {
        let schema = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type(media)
            .into();
        self.body = Some(BodyOf {
            schema,
            media,
            example: None,
            required,
            what: "The body",
        });
        self
    }

    /// The method, as the router has it (`get`, `post`, `delete`).
    #[cfg(test)]
    pub fn method(&self) -> String {
        self.method.as_str().to_ascii_lowercase()
    }

    #[cfg(test)]
    pub fn path(&self) -> &'static str {
        self.path
    }

    /// Answers `status` with JSON `A` or `B`.
    pub fn ok_either<A: ToSchema, B: ToSchema>(
        mut self,
        status: u16,
        what: &str,
        example: Value,
    ) -> Op {
        self.schemas.push(collect::<B>);
        let schema = utoipa::openapi::schema::OneOfBuilder::new()
            .item(refer::<A>())
            .item(refer::<B>())
            .into();
        self.answer_json::<A>(status, what, schema, example)
    }

    /// Answers `status` with JSON `T`.
    pub fn ok<T: ToSchema>(self, status: u16, what: &str, example: Value) -> Op {
        self.answer_json::<T>(status, what, refer::<T>(), example)
    }

    /// Answers `status` with a JSON array of `T`.
    pub fn ok_list<T: ToSchema>(self, status: u16, what: &str, example: Value) -> Op {
        self.answer_json::<T>(status, what, array::<T>(), example)
    }

    fn answer_json<T: ToSchema>(
        mut self,
        status: u16,
        what: &str,
        schema: RefOr<Schema>,
        example: Value,
    ) -> Op {
        self.schemas.push(collect::<T>);
        self.answer(
            status,
            what,
            Some(Content {
                media: "application/json",
                schema,
                example: Some(example),
            }),
        )
    }

    /// Answers `status` with `schema` as `media`.
    pub fn ok_as(self, status: u16, what: &str, media: &'static str, schema: RefOr<Schema>) -> Op {
        self.answer(
            status,
            what,
            Some(Content {
                media,
                schema,
                example: None,
            }),
        )
    }

    /// Answers `status` with no body.
    pub fn empty(self, status: u16, what: &str) -> Op {
        self.answer(status, what, None)
    }

    fn answer(mut self, status: u16, what: &str, content: Option<Content>) -> Op {
        let a = self.answers.entry(status).or_insert(Answer {
            description: String::new(),
            content: Vec::new(),
            headers: Vec::new(),
            links: Vec::new(),
        });
        a.description = what.to_string();
        a.content.extend(content);
        self
    }

    /// A header of the answer `status`.
    pub fn header(mut self, status: u16, name: &'static str, what: &'static str) -> Op {
        if let Some(a) = self.answers.get_mut(&status) {
            a.headers.push((name, what));
        }
        self
    }

    /// A link from the answer `status` to operation `to`, its parameters
    /// taken from the answer (`$response.body#/id`).
    pub fn link(
        self,
        status: u16,
        name: &'static str,
        to: &'static str,
        params: &[(&'static str, &'static str)],
    ) -> Op {
        self.add_link(status, name, to, params, None)
    }

    /// A link as [`Op::link`], with the body the linked operation takes
    /// (its values runtime expressions in braces, `{$response.body#/…}`).
    pub fn link_with_body(
        self,
        status: u16,
        name: &'static str,
        to: &'static str,
        params: &[(&'static str, &'static str)],
        body: Value,
    ) -> Op {
        self.add_link(status, name, to, params, Some(body))
    }

    fn add_link(
        mut self,
        status: u16,
        name: &'static str,
        to: &'static str,
        params: &[(&'static str, &'static str)],
        body: Option<Value>,
    ) -> Op {
        if let Some(a) = self.answers.get_mut(&status) {
            a.links.push(LinkTo {
                name,
                to,
                params: params.to_vec(),
                body,
            });
        }
        self
    }

    /// An error this route answers, beyond those every route does; a
    /// status given twice says both whens.
    pub fn error(self, status: u16, what: &str) -> Op {
        let what = match self.answers.get(&status) {
            Some(a) if !a.description.is_empty() => format!("{}; or {what}", a.description),
            _ => what.to_string(),
        };
        self.answer(status, &what, None)
    }

    /// The scope of token the route needs (`auth::needed`, which the
    /// server enforces).
    fn scope(&self) -> TokenScope {
        super::super::auth::needed(&self.method, self.path)
    }

    /// The statuses every route of its kind answers: a query parameter it
    /// does not take (400), the token (401) and its scope (403), a body
    /// too large (413), the request timeout (408), a database that does
    /// not answer (503).
    fn shared_errors(&mut self) {
        let scope = self.scope();
        let mut add = |status: u16, what: String| {
            self.answers.entry(status).or_insert(Answer {
                description: what,
                content: Vec::new(),
                headers: Vec::new(),
                links: Vec::new(),
            });
        };
        add(
            400,
            "A query parameter the route does not take, or a bad value".into(),
        );
        if self.token {
            add(401, "No valid token".into());
        }
        if self.token && scope > TokenScope::Read {
            add(403, format!("The token's scope is short of `{scope}`"));
        }
        if self.body.is_some() {
            add(413, "The body is larger than the server takes".into());
        }
        if self.bounded {
            add(
                408,
                format!(
                    "The request took over {} s",
                    super::super::REQUEST_TIMEOUT.as_secs()
                ),
            );
        }
        if self.path != "/api/v1/openapi.json" {
            add(
                503,
                "The database does not answer (after `WF_DB_RETRY`), or is locked".into(),
            );
        }
    }

    /// The operation, and the schemas it refers to added to `schemas`.
    pub fn build(mut self, schemas: &mut Schemas) -> (String, HttpMethod, Operation) {
        self.shared_errors();
        for add in &self.schemas {
            add(schemas);
        }
        let scope = self.scope();
        let mut op = OperationBuilder::new()
            .operation_id(Some(self.id))
            .summary(Some(self.summary))
            .description(self.description.map(|d| {
                if self.token {
                    format!("{d}\n\nNeeds a token of scope `{scope}`.")
                } else {
                    d.to_string()
                }
            }))
            .parameters(Some(self.params));
        if let Some(BodyOf {
            schema,
            media,
            example,
            required,
            what,
        }) = self.body
        {
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .description(Some(what))
                    .content(
                        media,
                        ContentBuilder::new()
                            .schema(Some(schema))
                            .example(example)
                            .build(),
                    )
                    .required(Some(if required {
                        Required::True
                    } else {
                        Required::False
                    }))
                    .build(),
            ));
        }
        for (status, a) in self.answers {
            let mut r = ResponseBuilder::new().description(a.description);
            let bare = a.content.is_empty();
            for c in a.content {
                r = r.content(
                    c.media,
                    ContentBuilder::new()
                        .schema(Some(c.schema))
                        .example(c.example)
                        .build(),
                );
            }
            if bare && status >= 400 {
                r = r.content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(RefOr::<Schema>::Ref(Ref::from_schema_name("Error"))))
                        .build(),
                );
            }
            for (name, what) in a.headers {
                let mut h = Header::new(ObjectBuilder::new().schema_type(Type::String));
                h.description = Some(what.to_string());
                r = r.header(name, h);
            }
            for link in a.links {
                let mut l = LinkBuilder::new()
                    .operation_id(link.to)
                    .request_body(link.body);
                for (p, from) in link.params {
                    l = l.parameter(p, from);
                }
                r = r.link(link.name, l.build());
            }
            op = op.response(status.to_string(), r.build());
        }
        if !self.token {
            op = op.security(SecurityRequirement::default());
        }
        let method = match self.method {
            Method::POST => HttpMethod::Post,
            Method::DELETE => HttpMethod::Delete,
            _ => HttpMethod::Get,
        };
        (self.path.to_string(), method, op.build())
    }
}

/// `{error: {code, message}}`, every error's shape.
pub fn error_schema() -> Schema {
    // Kinds that share a code (the database unreachable, or unavailable)
    // say it once.
    let mut codes: Vec<&str> = crate::error_kind::ErrorKind::ALL
        .iter()
        .map(|k| k.code())
        .collect();
    codes.sort_unstable();
    codes.dedup();
    let inner = ObjectBuilder::new()
        .property(
            "code",
            crate::vocab::words(
                "The kind of error, as the CLI's exit code tells it (docs/api.md)",
                &codes,
            ),
        )
        .required("code")
        .property(
            "message",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("What went wrong, in words naming the field or value")),
        )
        .required("message")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ));
    ObjectBuilder::new()
        .property("error", inner)
        .required("error")
        .additional_properties(Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(false)))
        .examples([serde_json::json!({"error": {"code": "not_found", "message": "no instance matches `0f3a`"}})])
        .into()
}
