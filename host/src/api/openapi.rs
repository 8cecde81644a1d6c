//! `GET /openapi.json`: the OpenAPI 3.1 document, generated from the endpoint
//! table (each row carries its `Doc`) and from the typed bodies (`views.rs`,
//! the request types, `journal::payloads`). Nothing here is written by hand
//! twice: a row without a document cannot exist, and a test checks that the
//! document's operations are exactly the table's rows.

use utoipa::openapi::path::{Operation, OperationBuilder, Parameter, ParameterIn, PathItem};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type,
};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, HttpMethod, InfoBuilder, OpenApi, OpenApiBuilder,
    PathsBuilder, Ref, RefOr, Required, ResponseBuilder, SecurityRequirement,
};
use utoipa::{PartialSchema, ToSchema};

use super::ErrorCode;
use super::agui::AgUiEvent;
use super::views::{self, ErrorBody};
use super::{Access, Endpoint};
use crate::journal::EventType;
use crate::journal::payloads::*;
use crate::store::{ApprovalFeedEntry, FeedKind};

/// Component schemas collected while the document is built.
pub(super) type Schemas = Vec<(String, RefOr<Schema>)>;
/// Adds a type's schema (and those it refers to) and returns a reference.
pub(super) type SchemaFn = fn(&mut Schemas) -> RefOr<Schema>;

/// A reference to `T`'s component schema, which is added with its own.
pub(super) fn schema<T: ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

/// An array of `T`.
pub(super) fn list<T: ToSchema>(schemas: &mut Schemas) -> RefOr<Schema> {
    ArrayBuilder::new().items(schema::<T>(schemas)).into()
}

/// An endpoint's request body.
#[derive(Clone, Copy)]
pub(super) enum Body {
    None,
    Json(SchemaFn),
    /// A JSON body that may be left out (`extract::OptionalJson`).
    OptionalJson(SchemaFn),
    /// `multipart/form-data` with the parts of `POST /deployments`.
    Bundle,
}

/// An endpoint's success response.
#[derive(Clone, Copy)]
pub(super) enum Reply {
    /// No body (`204`).
    Empty,
    Json(SchemaFn),
    /// `text/event-stream` of journal events (or, `?format=ag-ui`, AG-UI events).
    Events,
    /// `text/event-stream` of AG-UI events (docs/ag-ui.md).
    AgUiEvents,
    /// `text/event-stream` of the approvals feed (docs/approvals.md).
    ApprovalFeed,
    /// A file of the web console, or the metrics text, in this media type.
    Text(&'static str),
    /// MCP's answer: a JSON-RPC response, or SSE (docs/mcp.md).
    Mcp,
}

/// The values a query parameter takes.
#[derive(Clone, Copy)]
pub(super) enum Query {
    Text,
    Uuid,
    /// An event id, or empty (as an empty `Last-Event-ID`: from the start).
    EventId,
    /// An approvals-feed id (digits), or empty.
    FeedId,
    /// A page size, 1 to 500.
    Limit,
    OneOf(&'static [&'static str]),
}

/// What the document says of one endpoint, beside its table row.
#[derive(Clone, Copy)]
pub(super) struct Doc {
    summary: &'static str,
    body: Body,
    status: u16,
    /// Another success status with the same reply (`PUT` creating: 201).
    also: Option<u16>,
    reply: Reply,
    /// Statuses answered without a body (the stream's 204, a console file's 304).
    empty: &'static [u16],
    /// Error statuses of this endpoint besides those its access implies.
    errors: &'static [u16],
    /// Query parameters: name, description, values.
    query: &'static [(&'static str, &'static str, Query)],
    /// Takes an `Idempotency-Key` header (docs/api.md).
    idempotent: bool,
}

impl Doc {
    pub(super) const fn new(summary: &'static str, status: u16, reply: Reply) -> Doc {
        Doc {
            summary,
            body: Body::None,
            status,
            also: None,
            reply,
            empty: &[],
            errors: &[],
            query: &[],
            idempotent: false,
        }
    }

    pub(super) const fn idempotent(mut self) -> Doc {
        self.idempotent = true;
        self
    }

    pub(super) const fn body(mut self, body: Body) -> Doc {
        self.body = body;
        self
    }

    pub(super) const fn also(mut self, status: u16) -> Doc {
        self.also = Some(status);
        self
    }

    pub(super) const fn empty(mut self, statuses: &'static [u16]) -> Doc {
        self.empty = statuses;
        self
    }

    pub(super) const fn errors(mut self, errors: &'static [u16]) -> Doc {
        self.errors = errors;
        self
    }

    pub(super) const fn query(
        mut self,
        query: &'static [(&'static str, &'static str, Query)],
    ) -> Doc {
        self.query = query;
        self
    }
}

/// The whole document.
pub(super) fn document(rows: &[(Endpoint, Doc)]) -> OpenApi {
    let mut schemas = Schemas::new();
    let mut paths = PathsBuilder::new();
    for (endpoint, doc) in rows {
        let method = match endpoint.method {
            "POST" => HttpMethod::Post,
            "PUT" => HttpMethod::Put,
            "DELETE" => HttpMethod::Delete,
            "PATCH" => HttpMethod::Patch,
            _ => HttpMethod::Get,
        };
        let operation = operation(endpoint, doc, &mut schemas);
        paths = paths.path(endpoint.path, PathItem::new(method, operation));
    }
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas.dedup_by(|a, b| a.0 == b.0);
    let bearer = SecurityScheme::Http(
        HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some("An API key: platform, or invocation (docs/api.md); or an end-user token, minted or the app's identity provider's JWT (docs/end-users.md)"))
            .build(),
    );
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme("api_key", bearer)
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("agenthost")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The agenthost HTTP API (docs/api.md). Events: docs/events.md.",
                ))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components))
        .build()
}

fn operation(endpoint: &Endpoint, doc: &Doc, schemas: &mut Schemas) -> Operation {
    let mut op = OperationBuilder::new()
        .summary(Some(doc.summary))
        .operation_id(Some(operation_id(endpoint)));
    for name in path_parameters(endpoint.path) {
        let schema = match name.as_str() {
            // Secret names (secrets::valid_name).
            "key" => text().pattern(Some(
                "^(?!SERVICE_|AGENTHOST_)[A-Za-z_][A-Za-z0-9_]{0,127}$",
            )),
            _ => text(),
        };
        op = op.parameter(
            Parameter::builder()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema)),
        );
    }
    for (name, description, kind) in doc.query {
        let schema = match kind {
            Query::Text => text(),
            Query::Uuid => uuid(),
            Query::EventId => text().pattern(Some(FRAME_ID_OR_EMPTY)),
            Query::FeedId => text().pattern(Some("^[0-9]{0,19}$")),
            // Clamped to 1..=500 by the server.
            Query::Limit => ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                .maximum(Some(usize::MAX)),
            Query::OneOf(values) => text().enum_values(Some(values.iter().copied())),
        };
        op = op.parameter(
            Parameter::builder()
                .name(*name)
                .parameter_in(ParameterIn::Query)
                .required(Required::False)
                .description(Some(*description))
                .schema(Some(schema)),
        );
    }
    if doc.idempotent {
        op = op.parameter(
            Parameter::builder()
                .name("Idempotency-Key")
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "Makes a retry safe: the same key with the same request gets the first answer \
                     without the work being done again (24 h); with another request, 422 \
                     `idempotency_key_reused` (docs/api.md)",
                ))
                .schema(Some(
                    text()
                        .min_length(Some(1))
                        .max_length(Some(crate::store::MAX_KEY_LEN))
                        .pattern(Some("^[!-~]{1,255}$")),
                )),
        );
    }
    match doc.body {
        Body::None => {}
        Body::Json(body) | Body::OptionalJson(body) => {
            let required = match doc.body {
                Body::Json(_) => Required::True,
                _ => Required::False,
            };
            let content = ContentBuilder::new().schema(Some(body(schemas))).build();
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .content("application/json", content)
                    .required(Some(required))
                    .build(),
            ));
        }
        Body::Bundle => {
            let parts = ObjectBuilder::new()
                .property("tarball", binary())
                .property("manifest", ObjectBuilder::new().schema_type(Type::String))
                .property(
                    "approval_policy",
                    ObjectBuilder::new().schema_type(Type::String),
                )
                .required("tarball")
                .required("manifest")
                .additional_properties(Some(AdditionalProperties::FreeForm(false)));
            let content = ContentBuilder::new().schema(Some(parts)).build();
            op = op.request_body(Some(
                RequestBodyBuilder::new()
                    .content("multipart/form-data", content)
                    .required(Some(Required::True))
                    .build(),
            ));
        }
    }
    let ok = match doc.reply {
        Reply::Empty => ResponseBuilder::new().description("Done; no body"),
        Reply::Json(reply) => ResponseBuilder::new().description("OK").content(
            "application/json",
            ContentBuilder::new().schema(Some(reply(schemas))).build(),
        ),
        Reply::Events => {
            event_schema(schemas);
            schema::<AgUiEvent>(schemas);
            ResponseBuilder::new()
                .description("The session's journal as Server-Sent Events: `id:` the event id, `data:` the event (docs/events.md); with `format=ag-ui`, AG-UI events (docs/ag-ui.md)")
                .content(
                    "text/event-stream",
                    ContentBuilder::new().schema(Some(frame_schema(schemas))).build(),
                )
        }
        Reply::AgUiEvents => {
            schema::<AgUiEvent>(schemas);
            ResponseBuilder::new()
                .description("The run as AG-UI events over Server-Sent Events: `id:` resumable on the events endpoint with `format=ag-ui`, `data:` the event (docs/ag-ui.md)")
                .content(
                    "text/event-stream",
                    ContentBuilder::new().schema(Some(agui_frame_schema(schemas))).build(),
                )
        }
        Reply::ApprovalFeed => {
            schema::<ApprovalFeedEntry>(schemas);
            schema::<views::ApprovalSnapshot>(schemas);
            ResponseBuilder::new()
                .description("The approvals feed as Server-Sent Events: first an `APPROVALS_SNAPSHOT` (unless resumed), then `APPROVAL_REQUESTED`, `APPROVAL_DECIDED` and `APPROVAL_WITHDRAWN` in commit order; `id:` the feed position (docs/approvals.md)")
                .content(
                    "text/event-stream",
                    ContentBuilder::new().schema(Some(feed_frame_schema(schemas))).build(),
                )
        }
        Reply::Mcp => ResponseBuilder::new()
            .description("A JSON-RPC response (`application/json`), or for `tools/call` Server-Sent Events: `data:` progress notifications, then the response (docs/mcp.md)")
            .content(
                "application/json",
                ContentBuilder::new().schema(Some(ObjectBuilder::new().schema_type(Type::Object))).build(),
            )
            .content(
                "text/event-stream",
                ContentBuilder::new().schema(Some(String::schema())).build(),
            ),
        Reply::Text(media) => ResponseBuilder::new().description("OK").content(
            media,
            ContentBuilder::new().schema(Some(String::schema())).build(),
        ),
    };
    let ok = ok.build();
    if let Some(also) = doc.also {
        op = op.response(also.to_string(), ok.clone());
    }
    op = op.response(doc.status.to_string(), ok);
    for status in doc.empty {
        let response = ResponseBuilder::new().description(match status {
            204 => "No content: the session has ended and the stream has nothing more",
            304 => "Not modified (ETag)",
            _ => "No body",
        });
        op = op.response(status.to_string(), response.build());
    }
    let error = schema::<ErrorBody>(schemas);
    for status in error_statuses(endpoint, doc) {
        let response = ResponseBuilder::new()
            .description(error_description(status))
            .content(
                "application/json",
                ContentBuilder::new().schema(Some(error.clone())).build(),
            );
        op = op.response(status.to_string(), response.build());
    }
    if endpoint.access != Access::Public {
        op = op.security(SecurityRequirement::new("api_key", Vec::<String>::new()));
    }
    op.build()
}

/// The endpoint's error statuses: its own, and those its access implies.
fn error_statuses(endpoint: &Endpoint, doc: &Doc) -> Vec<u16> {
    let access = endpoint.access;
    let mut statuses = doc.errors.to_vec();
    if endpoint.layers.rate == super::RateClass::PerKey {
        statuses.push(429);
    }
    if access != Access::Public {
        statuses.extend([401, 500, 503]);
    }
    if matches!(access, Access::Platform | Access::EndUser) {
        statuses.push(403);
    }
    if !matches!(doc.body, Body::None) {
        statuses.extend([400, 408, 413, 422]);
    }
    if matches!(doc.body, Body::Json(_) | Body::OptionalJson(_)) {
        statuses.push(415);
    }
    if !doc.query.is_empty() {
        statuses.push(400);
    }
    statuses.sort_unstable();
    statuses.dedup();
    statuses
}

/// What an error status means, and the codes it carries (any endpoint's).
fn error_description(status: u16) -> String {
    let base = match status {
        400 => "Bad request (malformed body or query, unknown event id)",
        401 => "Missing or invalid API key, stream token or end-user token",
        403 => {
            "Not for this credential: the endpoint needs a platform key (`forbidden`), or the error's code says what the app or the endpoint does not allow"
        }
        404 => "Not found",
        409 => "Conflicts with the current state",
        408 => "The request body did not arrive in time",
        413 => "The body is over its limit",
        415 => "Not `Content-Type: application/json`",
        422 => "Well-formed but refused",
        429 => "Too many requests: `Retry-After` says when to retry, if waiting helps",
        500 => "Server-side failure (details are logged)",
        503 => "Storage unavailable, overloaded, or shutting down",
        _ => "Error",
    };
    let codes: Vec<String> = (ErrorCode::ALL.iter())
        .filter(|code| {
            std::iter::once(&code.status())
                .chain(code.also())
                .any(|s| s.as_u16() == status)
        })
        .map(|code| format!("`{}`", code.as_str()))
        .collect();
    if codes.is_empty() {
        return base.to_string();
    }
    format!("{base}; `code` one of {}", codes.join(", "))
}

fn text() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn binary() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .content_media_type("application/x-tar")
}

/// `get_sessions_id_events` for `GET /sessions/{id}/events`.
fn operation_id(endpoint: &Endpoint) -> String {
    let path: String = endpoint
        .path
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let id = format!("{}_{}", endpoint.method.to_lowercase(), path);
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_end_matches('_').to_string()
}

/// The `{name}`s of a path.
pub(super) fn path_parameters(path: &str) -> Vec<String> {
    path.split('/')
        .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
        .map(str::to_string)
        .collect()
}

/// One SSE frame of the stream (as OpenAPI before 3.2 describes events):
/// `id:` the event's id, `data:` the event as JSON. `with_content_schemas`
/// adds `contentSchema` (the `Event`) to `data`, which utoipa cannot write.
fn frame_schema(schemas: &mut Schemas) -> RefOr<Schema> {
    let id = text().pattern(Some(FRAME_ID)).description(Some(
        "The event's id; in the AG-UI form, `<event id>:<n>` for all but the last frame of an event",
    ));
    let data = "The event: an `Event`, or in the AG-UI form an `AgUiEvent`";
    let frame = sse_frame(id, data).required("id").required("data");
    schemas.push((FRAME.into(), frame.into()));
    RefOr::Ref(Ref::from_schema_name(FRAME))
}

/// One SSE frame of an AG-UI run: `id:` as in the events endpoint's AG-UI
/// form (absent on a RUN_ERROR refusing the run), `data:` an `AgUiEvent`.
fn agui_frame_schema(schemas: &mut Schemas) -> RefOr<Schema> {
    let id = text().pattern(Some(FRAME_ID));
    let frame = sse_frame(id, "The event: an `AgUiEvent`").required("data");
    schemas.push((AGUI_FRAME.into(), frame.into()));
    RefOr::Ref(Ref::from_schema_name(AGUI_FRAME))
}

/// One SSE frame of the approvals feed: `id:` its position, `event:` its
/// kind, `data:` an `ApprovalFeedEntry` (an `ApprovalSnapshot` for the snapshot).
fn feed_frame_schema(schemas: &mut Schemas) -> RefOr<Schema> {
    let id = text().pattern(Some("^[0-9]+$")).description(Some(
        "The feed position: resume after it with Last-Event-ID",
    ));
    let data = "An `ApprovalFeedEntry`; for `APPROVALS_SNAPSHOT`, an `ApprovalSnapshot`";
    let kinds = [
        super::approval_feed::SNAPSHOT,
        FeedKind::Requested.as_str(),
        FeedKind::Decided.as_str(),
        FeedKind::Withdrawn.as_str(),
    ];
    let frame = sse_frame(id, data)
        .property("event", text().enum_values(Some(kinds)))
        .required("id")
        .required("event")
        .required("data");
    schemas.push((FEED_FRAME.into(), frame.into()));
    RefOr::Ref(Ref::from_schema_name(FEED_FRAME))
}

/// An SSE frame's fields: `id` as given, the default `event`, and `data`
/// (JSON text, described by `data`); the caller says which are required.
fn sse_frame(id: ObjectBuilder, data: &'static str) -> ObjectBuilder {
    ObjectBuilder::new()
        .property("id", id)
        .property(
            "event",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .description(Some("Absent: the default `message`")),
        )
        .property(
            "data",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .content_media_type("application/json")
                .description(Some(data)),
        )
}

const FRAME: &str = "EventFrame";
const AGUI_FRAME: &str = "AgUiEventFrame";
const FEED_FRAME: &str = "ApprovalFeedFrame";
/// An event id, or an AG-UI frame id `<event id>:<n>`.
const FRAME_ID: &str =
    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(:[0-9]+)?$";
/// As `FRAME_ID`, or empty (from the start).
const FRAME_ID_OR_EMPTY: &str =
    "^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(:[0-9]+)?)?$";

/// The document as JSON, with what utoipa cannot express added.
pub(super) fn to_json(document: &OpenApi) -> String {
    let mut value = serde_json::to_value(document).unwrap_or_default();
    let data = &mut value["components"]["schemas"][FRAME]["properties"]["data"];
    if data.is_object() {
        data["contentSchema"] = serde_json::json!({"oneOf": [
            {"$ref": "#/components/schemas/Event"},
            {"$ref": "#/components/schemas/AgUiEvent"},
        ]});
    }
    let data = &mut value["components"]["schemas"][AGUI_FRAME]["properties"]["data"];
    if data.is_object() {
        data["contentSchema"] = serde_json::json!({"$ref": "#/components/schemas/AgUiEvent"});
    }
    value.to_string()
}

/// One journal event in its envelope, one schema per event type: `type`
/// names it and `payload` is its payload type.
fn event_schema(schemas: &mut Schemas) -> RefOr<Schema> {
    let mut one_of = OneOfBuilder::new();
    for kind in EventType::ALL {
        let envelope = ObjectBuilder::new()
            .title(Some(kind.as_str()))
            .property("id", uuid())
            .property("seq", ObjectBuilder::new().schema_type(Type::Integer))
            .property("session_id", uuid())
            .property(
                "type",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some([kind.as_str()])),
            )
            .property("payload", payload_schema(kind, schemas))
            .property("created_at", ObjectBuilder::new().schema_type(Type::String))
            .required("id")
            .required("seq")
            .required("session_id")
            .required("type")
            .required("payload")
            .required("created_at");
        one_of = one_of.item(envelope);
    }
    schemas.push(("Event".into(), one_of.into()));
    RefOr::Ref(Ref::from_schema_name("Event"))
}

fn uuid() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String).format(Some(
        utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Uuid),
    ))
}

/// The payload schema of `kind` (exhaustive: a new type needs its schema).
fn payload_schema(kind: EventType, schemas: &mut Schemas) -> RefOr<Schema> {
    match kind {
        EventType::SessionCreated => schema::<SessionCreated>(schemas),
        EventType::TurnStarted => schema::<TurnStarted>(schemas),
        EventType::MessageStart => schema::<MessageStart>(schemas),
        EventType::MessageDelta => schema::<MessageDelta>(schemas),
        EventType::MessageEnd => schema::<MessageEnd>(schemas),
        EventType::ToolCall => schema::<ToolCall>(schemas),
        EventType::ToolResult => schema::<ToolResult>(schemas),
        EventType::ToolApprovalRequired => schema::<ToolApprovalRequired>(schemas),
        EventType::ToolApprovalGranted => schema::<ToolApprovalGranted>(schemas),
        EventType::ToolApprovalDenied => schema::<ToolApprovalDenied>(schemas),
        EventType::TurnError => schema::<TurnError>(schemas),
        EventType::TurnEnded => schema::<TurnEnded>(schemas),
        EventType::SessionEnded => schema::<SessionEnded>(schemas),
        EventType::HttpRequest => schema::<HttpRequest>(schemas),
        EventType::HttpRequestDenied => schema::<HttpRequestDenied>(schemas),
        EventType::HttpResponse => schema::<HttpResponse>(schemas),
        EventType::InputQueued => schema::<InputQueued>(schemas),
        EventType::TurnScheduled => schema::<TurnScheduled>(schemas),
        EventType::TurnScheduleCancelled => schema::<TurnScheduleCancelled>(schemas),
        EventType::LlmCall => schema::<LlmCall>(schemas),
        EventType::LlmResult => schema::<LlmResult>(schemas),
        EventType::BudgetReached => schema::<BudgetReached>(schemas),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn the_document_has_exactly_the_endpoints_of_the_table() {
        let text = to_json(&crate::api::openapi_document());
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(value["openapi"], "3.1.0");
        let mut documented = BTreeSet::new();
        for (path, item) in value["paths"].as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                documented.insert((method.to_uppercase(), path.clone()));
                // Every `{name}` of the path is a documented path parameter.
                let parameters: BTreeSet<String> = (operation["parameters"].as_array())
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "path")
                    .filter_map(|p| p["name"].as_str().map(str::to_string))
                    .collect();
                let expected: BTreeSet<String> = path_parameters(path).into_iter().collect();
                assert_eq!(parameters, expected, "{method} {path}");
                assert!(
                    operation["responses"]
                        .as_object()
                        .is_some_and(|r| !r.is_empty()),
                    "{method} {path} documents no response"
                );
            }
        }
        let table: BTreeSet<(String, String)> = crate::api::endpoints()
            .iter()
            .map(|e| (e.method.to_string(), e.path.to_string()))
            .collect();
        assert_eq!(documented, table);
    }

    #[test]
    fn every_schema_the_document_refers_to_is_in_it() {
        let text = crate::api::openapi_document().to_json().unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        let schemas = &value["components"]["schemas"];
        let mut missing = Vec::new();
        for part in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            if schemas.get(name).is_none() {
                missing.push(name.to_string());
            }
        }
        assert!(missing.is_empty(), "unresolved references: {missing:?}");
        // Every event type has its envelope in the stream's schema.
        let events = schemas["Event"]["oneOf"].as_array().map_or(0, Vec::len);
        assert_eq!(events, EventType::ALL.len());
    }
}
