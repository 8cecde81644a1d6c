//! End-to-end tests: the real `agenthost` binary over real HTTP on 127.0.0.1,
//! a real redb file in a temp dir, real components built from `examples/`
//! and `tests/fixtures/`.

// A test or bench crate has no public face: `pub` here means "shared
// between its modules" (`unreachable_pub` is for libraries, root Cargo.toml).
#![allow(unreachable_pub)]

mod agui;
mod api_fuzz;
mod app_schedules;
mod approval_feed;
mod approvals;
mod assistant;
mod auth;
mod bench;
mod browser;
mod bundles;
mod cluster;
mod cluster_end_users;
mod cluster_failover;
mod cluster_keys;
mod cluster_llm;
mod cluster_timers;
mod cluster_tls;
mod cluster_webhooks;
mod console;
mod console_schedules;
mod controls;
mod crash;
mod decision_pages;
mod decisions;
mod deploy;
mod dev;
mod edges;
mod end_user_approvers;
mod end_user_jwts;
mod end_user_revocation;
mod end_user_schedules;
mod end_user_turns;
mod end_users;
mod fair_share;
mod http;
mod idempotency;
mod invocation_caps;
mod journal_cap;
mod keys;
mod limits;
mod llm;
mod llm_budgets;
mod llm_sdks;
mod logs;
mod mcp_client;
mod mcp_server;
mod old_stores;
mod on_busy;
mod outbound;
mod parity;
mod python;
mod quotas;
mod redaction;
mod rollback;
mod schedules;
mod secrets;
mod sessions;
mod shutdown;
mod storage;
mod stream;
mod support;
mod timers;
mod timers_bench;
mod typescript;
mod waiting;
mod webhooks;
