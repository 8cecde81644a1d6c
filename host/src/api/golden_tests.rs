//! The wire contract pinned: every event payload type and every view is
//! serialized from fixed samples and compared with its golden file under
//! `tests/golden/` (`events/<TYPE>.json`, `views/<name>.json`). A change to a
//! field fails here until the golden file changes with it, in the same
//! commit, where a reviewer sees it: `UPDATE_GOLDEN=1 cargo test -p
//! agenthost golden` rewrites the files.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::views::*;
use crate::journal::payloads::*;
use crate::journal::{EventType, NewEvent, StoredEvent};
use crate::runtime::outbound::OutboundPolicy;
use crate::store::{
    AgentDescription, ApiKeyRecord, AppRecord, ApprovalFeedEntry, DeploymentRecord,
    DeploymentStatus, FeedKind, KeyClass, LimitsRecord, PendingApproval, SecretRecord,
    SessionRecord, SessionStatus, ToolCallRecord, ToolInfo, WithdrawReason,
};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/golden")
}

/// Compares `value`, pretty-printed, with the golden file `name`.
fn check(name: &str, value: &impl Serialize) -> Result<(), String> {
    let path = golden_dir().join(name);
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())? + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, &text).map_err(|e| e.to_string())?;
        return Ok(());
    }
    let golden = std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"))?;
    if golden != text {
        return Err(format!(
            "{name} changed: the wire format is a contract (docs/events.md, docs/api.md).\n\
             If the change is intended, run UPDATE_GOLDEN=1 cargo test -p agenthost golden \
             and commit the file.\n--- golden\n{golden}\n--- now\n{text}"
        ));
    }
    Ok(())
}

const ID: &str = "019aa8e2-7b3c-7d4e-8f10-1234567890ab";
const OTHER: &str = "019aa8e2-7b3c-7d4e-8f10-abcdef012345";

fn id() -> Uuid {
    Uuid::parse_str(ID).unwrap_or_default()
}

fn other() -> Uuid {
    Uuid::parse_str(OTHER).unwrap_or_default()
}

/// Samples of every payload of `kind`, covering each of its shapes. The
/// match is exhaustive: a new event type cannot go without its samples.
fn samples(kind: EventType) -> Vec<NewEvent> {
    let message_id = "msg_019aa8e27b3c7d4e8f101234567890ab".to_string();
    match kind {
        EventType::SessionCreated => {
            let created = |end_user| SessionCreated {
                app_id: id(),
                app: "hello".into(),
                route: "/chat".into(),
                deployment_id: other(),
                deployment_version: 3,
                input: json!("hi"),
                end_user,
            };
            let ada = EndUserInfo {
                id: "user_2Nq8".into(),
                claims: json!({"email": "ada@example.com"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            };
            vec![
                NewEvent::of(&created(None)),
                NewEvent::of(&created(Some(ada))),
            ]
        }
        EventType::TurnStarted => vec![
            NewEvent::of(&TurnStarted {
                turn: 1,
                reason: StartReason::Input,
                input: json!({"text": "hi"}),
            }),
            NewEvent::of(&TurnStarted {
                turn: 2,
                reason: StartReason::ApprovalDecision {
                    approved: true,
                    tool_call_id: "call_1_1".into(),
                    approver: "ops".into(),
                },
                input: json!("deploy it"),
            }),
            NewEvent::of(&TurnStarted {
                turn: 3,
                reason: StartReason::Schedule {
                    schedule_id: other(),
                },
                input: json!({"text": "the morning digest"}),
            }),
            NewEvent::of(&TurnStarted {
                turn: 4,
                reason: StartReason::BudgetRaised,
                input: json!({"text": "summarize the thread"}),
            }),
        ],
        EventType::MessageStart => vec![NewEvent::of(&MessageStart {
            message_id,
            role: Role::Assistant,
        })],
        EventType::MessageDelta => vec![NewEvent::of(&MessageDelta {
            message_id,
            delta: Delta::Text {
                text: "Hello".into(),
            },
        })],
        EventType::MessageEnd => vec![
            NewEvent::of(&MessageEnd {
                message_id: message_id.clone(),
                role: Role::User,
                text: "hi".into(),
                incomplete: None,
            }),
            NewEvent::of(&MessageEnd {
                message_id,
                role: Role::Assistant,
                text: "Hel".into(),
                incomplete: Some(true),
            }),
        ],
        EventType::ToolCall => vec![
            NewEvent::of(&ToolCall {
                tool_call_id: "call_1_1".into(),
                name: "rm".into(),
                arguments: json!({"path": "/tmp/x"}),
                mcp_server: None,
            }),
            NewEvent::of(&ToolCall {
                tool_call_id: "call_1_2".into(),
                name: "docs__search".into(),
                arguments: json!({"query": "wasm"}),
                mcp_server: Some("docs".into()),
            }),
        ],
        EventType::ToolResult => [ToolStatus::Ok, ToolStatus::Error, ToolStatus::Denied]
            .into_iter()
            .map(|status| {
                NewEvent::of(&ToolResult {
                    tool_call_id: "call_1_1".into(),
                    name: "rm".into(),
                    status,
                    output: json!({"removed": 1}),
                })
            })
            .collect(),
        EventType::ToolApprovalRequired => [None, Some("2026-11-22T11:00:00.000Z")]
            .into_iter()
            .map(|expires_at| {
                NewEvent::of(&ToolApprovalRequired {
                    tool_call_id: "call_1_1".into(),
                    name: "rm".into(),
                    arguments: json!({"path": "/tmp/x"}),
                    reason: Some("clean up".into()),
                    gated_by: vec!["code".into(), "policy".into()],
                    expires_at: expires_at.map(String::from),
                })
            })
            .collect(),
        // A plain decision, then the richer ones (docs/approvals.md).
        EventType::ToolApprovalGranted => [
            (None, None, None),
            (Some(json!({"path": "/tmp/y"})), None, Some("only y")),
            (None, Some(json!({"removed": 0})), Some("already clean")),
        ]
        .into_iter()
        .map(|(arguments, result, message)| {
            NewEvent::of(&ToolApprovalGranted {
                tool_call_id: "call_1_1".into(),
                name: "rm".into(),
                approver: "ops".into(),
                key_id: "key_0123".into(),
                original_arguments: arguments.as_ref().map(|_| json!({"path": "/tmp/x"})),
                arguments,
                result,
                message: message.map(String::from),
                address_hash: None,
            })
        })
        .collect(),
        EventType::ToolApprovalDenied => [None, Some("not on a Friday")]
            .into_iter()
            .map(|message| {
                NewEvent::of(&ToolApprovalDenied {
                    tool_call_id: "call_1_1".into(),
                    name: "rm".into(),
                    approver: "ops".into(),
                    key_id: "key_0123".into(),
                    message: message.map(String::from),
                    address_hash: None,
                })
            })
            .collect(),
        EventType::TurnError => TurnErrorKind::ALL
            .into_iter()
            .map(|kind| {
                NewEvent::of(&TurnError {
                    turn: 1,
                    kind,
                    message: "what went wrong".into(),
                })
            })
            .collect(),
        EventType::TurnEnded => vec![NewEvent::of(&TurnEnded { turn: 1 })],
        EventType::SessionEnded => vec![
            NewEvent::of(&SessionEnded::default()),
            NewEvent::of(&SessionEnded {
                reason: Some("the user closed the chat".into()),
                key_id: Some("key_0123".into()),
            }),
        ],
        EventType::HttpRequest => vec![NewEvent::of(&HttpRequest {
            request_id: "http_1_1".into(),
            method: "GET".into(),
            origin: "https://api.example.com".into(),
            path: "/v1/items".into(),
        })],
        EventType::HttpRequestDenied => vec![NewEvent::of(&HttpRequestDenied {
            request_id: "http_1_2".into(),
            method: "POST".into(),
            origin: "https://evil.example".into(),
            path: "/".into(),
            reason: "the origin is not on this deployment's outbound allowlist".into(),
        })],
        EventType::HttpResponse => vec![
            NewEvent::of(&HttpResponse {
                request_id: "http_1_1".into(),
                status: Some(200),
                error: None,
                duration_ms: 12.5,
                bytes: 512,
            }),
            NewEvent::of(&HttpResponse {
                request_id: "http_1_3".into(),
                status: None,
                error: Some("the connection was refused".into()),
                duration_ms: 0.4,
                bytes: 0,
            }),
        ],
        EventType::InputQueued => vec![
            NewEvent::of(&InputQueued {
                input_id: "inq_019aa8e27b3c7d4e8f101234567890ab".into(),
                input: json!({"text": "and also this"}),
                interrupt: false,
                position: 2,
            }),
            NewEvent::of(&InputQueued {
                input_id: "inq_019aa8e27b3c7d4e8f10123456789999".into(),
                input: json!("stop, do this instead"),
                interrupt: true,
                position: 1,
            }),
        ],
        EventType::TurnScheduled => vec![NewEvent::of(&TurnScheduled {
            schedule_id: id(),
            at: "2026-12-01T08:00:00.000Z".into(),
            input: json!({"text": "follow up on the shipment"}),
        })],
        EventType::TurnScheduleCancelled => {
            vec![NewEvent::of(&TurnScheduleCancelled { schedule_id: id() })]
        }
        EventType::LlmCall => vec![NewEvent::of(&LlmCall {
            call_id: "llm_1_1".into(),
            alias: "main".into(),
            provider: "openai".into(),
            model: "gpt-4.1-mini".into(),
        })],
        EventType::LlmResult => vec![
            NewEvent::of(&LlmResult {
                call_id: "llm_1_1".into(),
                usage: LlmUsage {
                    input_tokens: 20,
                    output_tokens: 7,
                },
                finish_reason: "stop".into(),
                cost: Some(0.0000192),
                served_by: Some("main".into()),
                error: None,
            }),
            NewEvent::of(&LlmResult {
                call_id: "llm_1_2".into(),
                usage: LlmUsage::default(),
                finish_reason: "error".into(),
                cost: None,
                served_by: None,
                error: Some("HTTP 503".into()),
            }),
        ],
        EventType::BudgetReached => vec![NewEvent::of(&BudgetReached {
            call_id: Some("llm_2_1".into()),
            scope: "session".into(),
            unit: "tokens".into(),
            limit: 10000.0,
            spent: 8200.0,
            reserved: 0.0,
            needed: 4121.0,
        })],
    }
}

#[test]
fn golden_every_event_payload_is_pinned() {
    let mut failures = Vec::new();
    for kind in EventType::ALL {
        let payloads: Vec<Value> = samples(kind)
            .iter()
            .map(|event| {
                assert_eq!(event.event_type, kind, "a sample of {kind:?}");
                serde_json::from_str(event.payload.get()).unwrap_or(Value::Null)
            })
            .collect();
        let name = format!("events/{}.json", kind.as_str());
        if let Err(failure) = check(&name, &payloads) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The `data` of every webhook event, made from the journal samples above
/// (and a build of each outcome): a contract with receivers (docs/webhooks.md).
#[test]
fn golden_every_webhook_body_is_pinned() {
    let session = session_record();
    let mut bodies: std::collections::BTreeMap<&str, Vec<Value>> = Default::default();
    for kind in EventType::ALL {
        for (seq, event) in samples(kind).iter().enumerate() {
            let at = "2026-11-22T10:00:01.456Z";
            let (_, json) = crate::journal::encode_record(id(), seq as u64, id(), event, at);
            let event = StoredEvent {
                id: id(),
                seq: seq as u64,
                json,
            };
            let data = crate::store::webhook_event_data(&event, &session);
            if let Some((kind, data)) = data.expect("the samples' payloads read") {
                bodies.entry(kind).or_default().push(data);
            }
        }
    }
    for status in [DeploymentStatus::Active, DeploymentStatus::Failed] {
        let mut record = deployment_record(status);
        if status == DeploymentStatus::Failed {
            record.error = Some("describe failed: boom".into());
        }
        let (kind, data) = crate::store::webhook_deployment_data(&record, "ops");
        bodies.entry(kind).or_default().push(data);
    }
    let timeout = NewEvent::of(&ToolApprovalDenied {
        tool_call_id: "call_1_1".into(),
        name: "rm".into(),
        approver: "timeout".into(),
        key_id: "timeout".into(),
        message: None,
        address_hash: None,
    });
    let (_, json) =
        crate::journal::encode_record(id(), 9, id(), &timeout, "2026-11-22T11:00:00.000Z");
    let timeout = StoredEvent {
        id: id(),
        seq: 9,
        json,
    };
    let data = crate::store::webhook_event_data(&timeout, &session);
    if let Some((kind, data)) = data.expect("the sample's payload reads") {
        bodies.entry(kind).or_default().push(data);
    }
    for reason in [WithdrawReason::SessionEnded, WithdrawReason::SessionDeleted] {
        let ended = (reason == WithdrawReason::SessionEnded)
            .then(|| json!({"id": id(), "type": "SESSION_ENDED"}));
        let entry = ApprovalFeedEntry {
            kind: FeedKind::Withdrawn,
            session_id: session.id,
            app_id: session.app_id,
            app: session.app_slug.clone(),
            tool_call_id: "call_1_1".into(),
            event: ended,
            reason: Some(reason),
            end_user: session.end_user.clone(),
        };
        let data = crate::store::webhook_withdrawn_data(&session, &entry);
        bodies.entry("approval.withdrawn").or_default().push(data);
    }
    assert_eq!(
        bodies.keys().copied().collect::<Vec<_>>(),
        {
            let mut all = crate::store::WEBHOOK_EVENTS.to_vec();
            all.sort_unstable();
            all
        },
        "a sample of every webhook event type"
    );
    let mut failures = Vec::new();
    for (kind, data) in &bodies {
        if let Err(failure) = check(&format!("webhooks/{kind}.json"), data) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn session_record() -> SessionRecord {
    let call = ToolCallRecord {
        tool_call_id: "call_1_1".into(),
        name: "rm".into(),
        arguments: json!({"path": "/tmp/x"}),
    };
    SessionRecord {
        id: id(),
        app_id: other(),
        app_slug: "ops".into(),
        route: "/chat".into(),
        deployment_id: other(),
        deployment_version: 2,
        status: SessionStatus::AwaitingApproval,
        turn: 1,
        created_at: "2026-11-22T10:00:00.123Z".into(),
        updated_at: "2026-11-22T10:00:01.456Z".into(),
        boot_id: None,
        pending_approval: Some(PendingApproval {
            call: call.clone(),
            reason: Some("clean up".into()),
            gated_by: vec!["code".into()],
            step: vec![call],
            input: json!("clean /tmp"),
            event_seq: 7,
            expires_at: Some("2026-11-22T11:00:01.456Z".into()),
        }),
        resume: None,
        end_user: Some("user_2Nq8".into()),
        queued: Vec::new(),
        schedules: Vec::new(),
        journal_bytes: 0,
        source: None,
        budget: Some(crate::store::Budget {
            tokens: Some(10_000),
            cost: None,
        }),
        llm: crate::store::LlmSpend {
            input_tokens: 6_100,
            output_tokens: 1_900,
            cost: 0.0,
            unreported: Default::default(),
            reserved: vec![crate::store::Reservation {
                call_id: "llm_3_1".into(),
                turn: 3,
                worst: crate::store::Spend {
                    tokens: 1_200,
                    cost: 0.0,
                },
            }],
        },
        budget_pause: None,
    }
}

fn deployment_record(status: DeploymentStatus) -> DeploymentRecord {
    let built = status != DeploymentStatus::Building && status != DeploymentStatus::Failed;
    DeploymentRecord {
        id: id(),
        app_id: other(),
        version: 2,
        status,
        created_at: "2026-11-22T10:00:00.123Z".into(),
        finished_at: (status != DeploymentStatus::Building)
            .then(|| "2026-11-22T10:00:04.000Z".into()),
        error: (status == DeploymentStatus::Failed)
            .then(|| "the entry `agent.wasm` named by agent.entry is missing".into()),
        manifest: "[app]\nslug = \"ops\"\n".into(),
        entry: "agent.wasm".into(),
        description: built.then(|| AgentDescription {
            routes: vec!["/chat".into()],
            tools: vec![ToolInfo {
                name: "rm".into(),
                description: "Removes a file".into(),
                parameters: json!({"type": "object"}),
                needs_approval: true,
            }],
        }),
        artifact: None,
        manifest_gated: vec!["rm".into()],
        approval_policy: vec![],
        secrets: vec!["OPENAI_API_KEY".into()],
        limits: LimitsRecord {
            wall_clock_secs: Some(60),
            ..LimitsRecord::default()
        },
        outbound: vec!["https://api.openai.com".into()],
        end_users: None,
        end_user_approvals: Vec::new(),
        llm_budget: None,
    }
}

#[test]
fn golden_every_view_is_pinned() {
    let app = AppRecord {
        id: other(),
        slug: "ops".into(),
        created_at: "2026-11-22T09:00:00.000Z".into(),
        current_deployment: Some(id()),
        schedules: Vec::new(),
    };
    let policy = OutboundPolicy::default();
    let session = SessionView::from(&session_record());
    let key = ApiKeyRecord {
        id: "key_0123".into(),
        name: "ops-team".into(),
        class: KeyClass::Invocation,
        app_id: Some(other()),
        sha256: "00".repeat(32),
        prefix: "ah_0123".into(),
        created_at: "2026-11-22T09:00:00.000Z".into(),
        last_used_at: None,
    };
    let approval: ApprovalEvent = serde_json::from_value(json!({
        "id": ID, "seq": 7, "session_id": ID, "type": "TOOL_APPROVAL_REQUIRED",
        "payload": {"tool_call_id": "call_1_1", "name": "rm", "arguments": {},
                    "reason": null, "gated_by": ["code"]},
        "created_at": "2026-11-22T10:00:01.456Z"
    }))
    .unwrap_or_else(|e| panic!("an approval event: {e}"));
    let views: Vec<(&str, Value)> = vec![
        ("session", json!(session)),
        (
            "schedule",
            json!(super::schedules::ScheduleView {
                id: other(),
                session_id: id(),
                at: "2026-11-23T07:00:00.000Z".into(),
                input: json!({"text": "the morning digest"}),
                created_at: "2026-11-22T10:00:00.123Z".into(),
                cron: None,
                timezone: None,
                end_at: None,
                created_by: Some(crate::store::ScheduleCreator::EndUser),
            }),
        ),
        (
            "schedule_cron",
            json!(super::schedules::ScheduleView {
                id: other(),
                session_id: id(),
                at: "2026-11-23T08:00:00.000Z".into(),
                input: json!({"text": "the morning digest"}),
                created_at: "2026-11-22T10:00:00.123Z".into(),
                cron: Some("0 9 * * MON-FRI".into()),
                timezone: Some("Europe/Berlin".into()),
                end_at: Some("2027-01-01T00:00:00.000Z".into()),
                created_by: Some(crate::store::ScheduleCreator::Platform),
            }),
        ),
        (
            "app_schedule",
            json!(super::app_schedules::AppScheduleView {
                id: other(),
                app_id: id(),
                route: "/digest".into(),
                at: "2026-11-23T01:00:00.000Z".into(),
                input: json!({"text": "the nightly digest"}),
                created_at: "2026-11-22T10:00:00.123Z".into(),
                cron: Some("0 2 * * *".into()),
                timezone: Some("Europe/Berlin".into()),
                end_at: None,
            }),
        ),
        (
            "session_queued",
            json!(SessionView {
                status: SessionStatus::Running,
                pending_approval: None,
                queued_inputs: 2,
                ..session.clone()
            }),
        ),
        (
            "created_session",
            json!(CreatedSession {
                session: session.clone(),
                stream_token: "st_abc".into(),
                stream_token_expires_at: "2026-11-22T11:00:00.000Z".into(),
            }),
        ),
        (
            "stream_token",
            json!(StreamToken {
                session_id: id(),
                stream_token: "st_abc".into(),
                stream_token_expires_at: "2026-11-22T11:00:00.000Z".into(),
            }),
        ),
        (
            "turn_accepted",
            json!(TurnAccepted {
                session_id: id(),
                turn: 2,
                status: SessionStatus::Running,
                queued: None,
            }),
        ),
        (
            "turn_accepted_queued",
            json!(TurnAccepted {
                session_id: id(),
                turn: 2,
                status: SessionStatus::AwaitingApproval,
                queued: Some(QueuedView {
                    input_id: "inq_019aa8e27b3c7d4e8f101234567890ab".into(),
                    position: 1,
                }),
            }),
        ),
        (
            "decision_accepted",
            json!(DecisionAccepted {
                session_id: id(),
                tool_call_id: "call_1_1".into(),
                approved: false,
                approver: "ops".into(),
                turn: 2,
                status: SessionStatus::Running,
            }),
        ),
        (
            "session_page",
            json!(SessionPage {
                items: vec![session.clone()],
                next_cursor: Some(ID.into()),
            }),
        ),
        (
            "approval_page",
            json!(ApprovalPage {
                items: vec![ApprovalItemView {
                    session,
                    event: approval,
                }],
                next_cursor: None,
            }),
        ),
        (
            "deployment",
            json!(
                [
                    DeploymentStatus::Building,
                    DeploymentStatus::Active,
                    DeploymentStatus::Failed,
                    DeploymentStatus::Retired
                ]
                .map(|s| DeploymentView::new(&deployment_record(s), &app, &policy))
            ),
        ),
        (
            "app",
            json!([
                AppView::new(&app, Some(&deployment_record(DeploymentStatus::Active))),
                AppView::new(&app, None),
            ]),
        ),
        ("api_key", json!(ApiKeyView::from(&key))),
        (
            "minted_key",
            json!(MintedKey {
                view: ApiKeyView::from(&key),
                key: "ah_0123_secret".into(),
            }),
        ),
        (
            "revoked_end_user",
            json!(super::end_users::RevokedEndUser {
                app_id: other(),
                user: "ada".into(),
                not_before: "2026-11-22T09:00:00.123Z".into(),
            }),
        ),
        (
            "secret",
            json!(SecretView::from(&SecretRecord {
                name: "OPENAI_API_KEY".into(),
                nonce: String::new(),
                ciphertext: String::new(),
                created_at: "2026-11-22T09:00:00.000Z".into(),
                updated_at: "2026-11-22T09:30:00.000Z".into(),
            })),
        ),
        ("webhook", json!(WebhookView::from(&webhook_record()))),
        (
            "created_webhook",
            json!(CreatedWebhook {
                webhook: WebhookView::from(&webhook_record()),
                secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            }),
        ),
        (
            "delivery_page",
            json!(DeliveryPage {
                items: vec![DeliveryView::from(&delivery_record())],
                next_cursor: Some(ID.into()),
            }),
        ),
        (
            "health",
            json!([
                Health {
                    status: "ready".into(),
                    reason: None
                },
                Health {
                    status: "not_ready".into(),
                    reason: Some("storage is unavailable".into())
                }
            ]),
        ),
        (
            "error",
            json!(ErrorBody {
                error: ErrorDetail {
                    code: "session_not_found".into(),
                    message: "session `x` not found".into(),
                },
            }),
        ),
    ];
    let mut failures = Vec::new();
    for (name, value) in &views {
        if let Err(failure) = check(&format!("views/{name}.json"), value) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn golden_mcp_messages_are_pinned() {
    let mut failures = Vec::new();
    for (name, value) in super::mcp::golden_samples() {
        if let Err(failure) = check(&format!("mcp/{name}.json"), &value) {
            failures.push(failure);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn webhook_record() -> crate::store::WebhookRecord {
    let sealed = SecretRecord {
        name: format!("webhook:{ID}"),
        nonce: String::new(),
        ciphertext: String::new(),
        created_at: "2026-11-22T09:00:00.000Z".into(),
        updated_at: "2026-11-22T09:00:00.000Z".into(),
    };
    crate::store::WebhookRecord {
        id: id(),
        url: "https://hooks.example.com/agenthost".into(),
        events: vec!["approval.requested".into(), "turn.failed".into()],
        app_id: Some(other()),
        app: Some("ops".into()),
        decision_links: true,
        secret: sealed.clone(),
        previous: Some(sealed),
        previous_until_ms: Some(1_795_000_000_000),
        link_generation: 0,
        disabled: None,
        created_at: "2026-11-22T09:00:00.000Z".into(),
        key_id: "key_0123".into(),
    }
}

fn delivery_record() -> crate::store::DeliveryRecord {
    crate::store::DeliveryRecord {
        id: id(),
        webhook_id: other(),
        event_type: "turn.failed".into(),
        payload: json!({"type": "turn.failed", "timestamp": "2026-11-22T10:00:01.456Z",
            "data": {"summary": "turn 2 of `ops` failed (trap)", "session_id": ID,
                     "app_id": OTHER, "app": "ops", "event_id": ID, "turn": 2,
                     "kind": "trap", "message": "wasm trap"}})
        .to_string(),
        created_at_ms: 1_795_000_000_000,
        state: crate::store::DeliveryState::Pending,
        next_at_ms: 1_795_000_005_000,
        lease_host: None,
        lease_until_ms: 0,
        attempt_count: 2,
        attempts: vec![
            crate::store::DeliveryAttempt {
                at: "2026-11-22T10:00:02.000Z".into(),
                status: Some(500),
                error: None,
                body: Some("try later".into()),
            },
            crate::store::DeliveryAttempt {
                at: "2026-11-22T10:00:07.000Z".into(),
                status: None,
                error: Some("connection refused".into()),
                body: None,
            },
        ],
    }
}
