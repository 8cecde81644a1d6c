//! LLM budgets of a session (docs/llm.md "Budgets"): the reservation a
//! declared-model call takes with its LLM_CALL, in the writer's
//! transaction (`ReserveLlm`: spent + reserved + this call's worst case
//! must stay within the limit, or nothing is written and the turn pauses),
//! its settlement to the provider's usage at LLM_RESULT (`settle`, from
//! `Append`), the worst case charged for a call its turn left unsettled
//! (`settle_turn`, at the turn's end, recovery included), and the budget
//! set through the API, which resumes a paused session (`SetBudget`).
//! The counters live in the session's record, never in a journal scan.

use std::sync::Arc;

use uuid::Uuid;

use super::TurnTicket;
use super::by::By;
use super::quotas::{self, Starting};
use crate::journal::payloads::{self, LlmResult, StartReason};
use crate::journal::{EventType, NewEvent};
use crate::store::StoreError;
use crate::store::batch::{Batch, Op};
use crate::store::now_rfc3339;
use crate::store::outbox::Outbox;
use crate::store::records::{Budget, LlmSpend, Reservation, SessionRecord, SessionStatus, Spend};
use crate::store::start::TurnReason;

/// Why a call does not fit its budget: what BUDGET_REACHED says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shortfall {
    /// `tokens` or `cost`: the unit of the limit.
    pub limit: f64,
    pub spent: f64,
    pub reserved: f64,
    pub needed: f64,
    pub tokens: bool,
}

/// What the session spent (provider counts, plus worst cases charged for
/// calls that never reported) in the budget's unit.
fn spent(spend: &LlmSpend, tokens: bool) -> f64 {
    if tokens {
        (spend.input_tokens + spend.output_tokens + spend.unreported.tokens) as f64
    } else {
        spend.cost + spend.unreported.cost
    }
}

fn amount(worst: &Spend, tokens: bool) -> f64 {
    if tokens {
        worst.tokens as f64
    } else {
        worst.cost
    }
}

/// Whether `worst` fits `limit` beside what `spend` spent and holds
/// reserved: spent + reserved + worst ≤ limit (tokens counted exactly, as
/// integers below 2^53).
pub(crate) fn fits(limit: &Budget, spend: &LlmSpend, worst: &Spend) -> Result<(), Shortfall> {
    let tokens = limit.cost.is_none();
    let limit_value = match (limit.tokens, limit.cost) {
        (_, Some(cost)) => cost,
        (Some(tokens), None) => tokens as f64,
        (None, None) => return Ok(()),
    };
    let spent = spent(spend, tokens);
    let reserved: f64 = spend
        .reserved
        .iter()
        .map(|r| amount(&r.worst, tokens))
        .sum();
    let needed = amount(worst, tokens);
    if spent + reserved + needed <= limit_value {
        Ok(())
    } else {
        Err(Shortfall {
            limit: limit_value,
            spent,
            reserved,
            needed,
            tokens,
        })
    }
}

/// The budget a session's calls are held to: its own, else the manifest's.
fn limit_of(record: &SessionRecord, manifest: Option<Budget>) -> Option<Budget> {
    record.budget.or(manifest)
}

/// How a reservation came out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reserved {
    /// LLM_CALL is journaled and the worst case held.
    Held,
    /// Nothing written: the turn pauses with this BUDGET_REACHED.
    Refused(payloads::BudgetReached),
}

/// Journals a running turn's LLM_CALL with its reservation, or refuses it
/// when the session's budget cannot cover its worst case. The turn waits
/// for its earlier events' commit first, so the LLM_CALL keeps its place.
pub(in crate::store) struct ReserveLlm {
    pub outbox: Arc<Outbox>,
    pub call: payloads::LlmCall,
    pub worst: Spend,
    /// The deployment's `[llm] budget_per_session`.
    pub manifest: Option<Budget>,
}

impl Op for ReserveLlm {
    type Output = Reserved;

    fn session(&self) -> Option<Uuid> {
        Some(self.outbox.session())
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Reserved, StoreError> {
        let (id, turn) = (self.outbox.session(), self.outbox.turn());
        super::sessions::running_turn(batch, id, turn)?;
        if batch.is_broken(id) {
            return Err(StoreError::Conflict(
                "an earlier write of this turn failed; the turn cannot go on".into(),
            ));
        }
        let record = &batch.session(id)?.record;
        if let Some(limit) = limit_of(record, self.manifest)
            && let Err(short) = fits(&limit, &record.llm, &self.worst)
        {
            return Ok(Reserved::Refused(payloads::BudgetReached {
                call_id: Some(self.call.call_id.clone()),
                scope: "session".into(),
                unit: if short.tokens { "tokens" } else { "cost" }.into(),
                limit: short.limit,
                spent: short.spent,
                reserved: short.reserved,
                needed: short.needed,
            }));
        }
        batch.write_events(id, &[NewEvent::of(&self.call)])?;
        let session = batch.session(id)?;
        session.record.llm.reserved.push(Reservation {
            call_id: self.call.call_id.clone(),
            turn,
            worst: self.worst,
        });
        batch.touch(id);
        Ok(Reserved::Held)
    }
}

/// Settles the reservation of each LLM_RESULT among a turn's `events` to
/// the provider's usage (and cost).
pub(super) fn settle(
    batch: &mut Batch<'_>,
    id: Uuid,
    events: &[NewEvent],
) -> Result<(), StoreError> {
    let mut changed = false;
    for event in events {
        if event.event_type != EventType::LlmResult {
            continue;
        }
        let Ok(result) = serde_json::from_str::<LlmResult>(event.payload.get()) else {
            continue;
        };
        let spend = &mut batch.session(id)?.record.llm;
        spend.reserved.retain(|r| r.call_id != result.call_id);
        spend.input_tokens += result.usage.input_tokens;
        spend.output_tokens += result.usage.output_tokens;
        spend.cost += result.cost.unwrap_or(0.0);
        changed = true;
    }
    if changed {
        batch.touch(id);
    }
    Ok(())
}

/// At the end of `turn` (its runner's, a cancel's, recovery's): the calls
/// it left without LLM_RESULT may have reached the provider, so their
/// worst case is charged (`unreported`) and the reservations released.
pub(super) fn settle_turn(batch: &mut Batch<'_>, id: Uuid, turn: u32) -> Result<(), StoreError> {
    let spend = &mut batch.session(id)?.record.llm;
    if !spend.reserved.iter().any(|r| r.turn == turn) {
        return Ok(());
    }
    let (left, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut spend.reserved)
        .into_iter()
        .partition(|r| r.turn == turn);
    spend.reserved = kept;
    for reservation in left {
        spend.unreported.tokens += reservation.worst.tokens;
        spend.unreported.cost += reservation.worst.cost;
    }
    batch.touch(id);
    Ok(())
}

/// `PATCH /sessions/{id}` `{"budget": ...}`: sets the session's own budget
/// (`None`: the manifest's applies again); a session paused at its budget
/// resumes (TURN_STARTED `budget_raised`) once the new one covers the
/// refused call's worst case.
pub(in crate::store) struct SetBudget {
    pub session: Uuid,
    pub budget: Option<Budget>,
    pub by: By,
}

impl Op for SetBudget {
    type Output = (SessionRecord, Option<TurnTicket>);

    fn tickets((_, ticket): &Self::Output) -> Vec<TurnTicket> {
        ticket.iter().cloned().collect()
    }

    fn session(&self) -> Option<Uuid> {
        Some(self.session)
    }

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<Self::Output, StoreError> {
        let id = self.session;
        let mut record = batch.session(id)?.record.clone();
        if record.status == SessionStatus::Ended {
            return Err(StoreError::Conflict("the session has ended".into()));
        }
        record.budget = match self.budget {
            Some(budget) => Some(budget),
            // Back to the manifest's `[llm] budget_per_session`.
            None => (batch.tx.deployment(record.deployment_id)?).and_then(|d| d.llm_budget),
        };
        record.updated_at = now_rfc3339();
        let resume = match (&record.budget_pause, record.status) {
            (Some(pause), SessionStatus::PausedBudget) => {
                let limit = limit_of(&record, pause.manifest);
                let covered = limit.is_none_or(|l| fits(&l, &record.llm, &pause.needed).is_ok());
                covered.then(|| pause.clone())
            }
            _ => None,
        };
        let Some(pause) = resume else {
            batch.session(id)?.record = record.clone();
            batch.touch(id);
            return Ok((record, None));
        };
        // Refused here, the budget is not set either: the caller retries.
        let (turn, app) = (record.turn + 1, record.app_id);
        quotas::check(batch, app, &record.app_slug, Starting::Turn, &self.by)?;
        batch.session(id)?.record = record;
        batch.touch(id);
        let started_seq = batch.session(id)?.next_seq;
        let started = NewEvent::of(&payloads::TurnStarted {
            turn,
            reason: StartReason::BudgetRaised,
            input: pause.input.clone(),
        });
        batch.write_events(id, &[started])?;
        let boot = batch.state.boot;
        let session = batch.session(id)?;
        session.record.turn = turn;
        session.record.status = SessionStatus::Running;
        session.record.boot_id = Some(boot);
        session.record.budget_pause = None;
        let record = session.record.clone();
        let ticket = TurnTicket {
            session_id: id,
            turn,
            deployment_id: record.deployment_id,
            app_slug: record.app_slug.clone(),
            route: record.route.clone(),
            input: pause.input,
            reason: TurnReason::Input,
            started_seq,
            journal_bytes: record.journal_bytes,
        };
        Ok((record, Some(ticket)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spend(input: u64, output: u64, reserved: &[u64]) -> LlmSpend {
        LlmSpend {
            input_tokens: input,
            output_tokens: output,
            reserved: (reserved.iter().enumerate())
                .map(|(i, t)| Reservation {
                    call_id: format!("llm_1_{i}"),
                    turn: 1,
                    worst: Spend {
                        tokens: *t,
                        cost: 0.0,
                    },
                })
                .collect(),
            ..LlmSpend::default()
        }
    }

    fn tokens(n: u64) -> Spend {
        Spend {
            tokens: n,
            cost: 0.0,
        }
    }

    #[test]
    fn a_call_fits_when_spent_reserved_and_its_worst_case_stay_within_the_limit() {
        let limit = Budget {
            tokens: Some(1000),
            cost: None,
        };
        // 300 spent + 200 reserved + 500 = 1000: exactly the limit fits.
        assert_eq!(fits(&limit, &spend(100, 200, &[200]), &tokens(500)), Ok(()));
        // One token more does not, and says what it counted.
        let short = fits(&limit, &spend(100, 200, &[200]), &tokens(501)).unwrap_err();
        assert_eq!(
            (short.limit, short.spent, short.reserved, short.needed),
            (1000.0, 300.0, 200.0, 501.0)
        );
        // Outstanding reservations count as spent until they settle.
        assert!(fits(&limit, &spend(0, 0, &[400, 400]), &tokens(300)).is_err());
        assert!(fits(&limit, &spend(0, 0, &[400]), &tokens(300)).is_ok());
        // Worst cases charged for calls that never reported count too.
        let mut lost = spend(0, 0, &[]);
        lost.unreported = tokens(900);
        assert!(fits(&limit, &lost, &tokens(101)).is_err());
        // No limit: anything fits.
        assert!(
            fits(
                &Budget::default(),
                &spend(10, 10, &[]),
                &tokens(u32::MAX as u64)
            )
            .is_ok()
        );
    }

    #[test]
    fn a_budget_in_money_counts_cost_not_tokens() {
        let limit = Budget {
            tokens: None,
            cost: Some(0.01),
        };
        let mut spent = spend(1_000_000, 0, &[]);
        spent.cost = 0.004;
        let worst = |cost| Spend {
            tokens: 10_000_000,
            cost,
        };
        assert!(fits(&limit, &spent, &worst(0.006)).is_ok());
        let short = fits(&limit, &spent, &worst(0.0061)).unwrap_err();
        assert!(!short.tokens);
        assert_eq!(short.spent, 0.004);
    }

    mod writer {
        use std::sync::Arc;

        use serde_json::json;

        use super::tokens;
        use crate::journal::NewEvent;
        use crate::journal::payloads::{LlmCall, LlmResult, LlmUsage};
        use crate::store::domain::Reserved;
        use crate::store::outbox::Outbox;
        use crate::store::test_calls::HostCalls;
        use crate::store::tests::{deployed, open};
        use crate::store::{Budget, TurnOutcome};

        fn call(n: u32) -> LlmCall {
            LlmCall {
                call_id: format!("llm_1_{n}"),
                alias: "main".into(),
                provider: "openai".into(),
                model: "m".into(),
            }
        }

        const LIMIT: Option<Budget> = Some(Budget {
            tokens: Some(1000),
            cost: None,
        });

        #[tokio::test]
        async fn concurrent_reservations_never_pass_the_limit() {
            let (_dir, store, writer) = open();
            deployed(&writer).await;
            let (session, ticket) = (writer.new_session("app".into(), "/chat".into(), json!("hi")))
                .await
                .unwrap();
            let outbox = Arc::new(Outbox::new(session.id, ticket.turn));
            let tries = (1..=20).map(|n| {
                let (writer, outbox) = (writer.clone(), outbox.clone());
                tokio::spawn(async move {
                    writer
                        .reserve_llm(&outbox, call(n), tokens(100), LIMIT)
                        .await
                        .unwrap()
                })
            });
            let mut held = 0;
            for outcome in futures::future::join_all(tries).await {
                if outcome.unwrap() == Reserved::Held {
                    held += 1;
                }
            }
            assert_eq!(held, 10, "exactly the limit's worth");
            let record = store.session(session.id).unwrap().unwrap();
            assert_eq!(record.llm.reserved.len(), 10);
            let calls = (store.events(session.id, 0, 100).unwrap().iter())
                .filter(|e| e.kind() == Some(crate::journal::EventType::LlmCall))
                .count();
            assert_eq!(calls, 10, "a refused call writes nothing");
        }

        #[tokio::test]
        async fn results_settle_to_usage_and_a_turn_end_charges_the_unsettled_worst_case() {
            let (_dir, store, writer) = open();
            deployed(&writer).await;
            let (session, ticket) = (writer.new_session("app".into(), "/chat".into(), json!("hi")))
                .await
                .unwrap();
            let outbox = Arc::new(Outbox::new(session.id, ticket.turn));
            let reserve = |n, worst| writer.reserve_llm(&outbox, call(n), tokens(worst), LIMIT);
            assert_eq!(reserve(1, 400).await.unwrap(), Reserved::Held);
            assert_eq!(reserve(2, 400).await.unwrap(), Reserved::Held);
            let Reserved::Refused(reached) = reserve(3, 201).await.unwrap() else {
                panic!("201 more than the 200 left");
            };
            assert_eq!(
                (
                    reached.limit,
                    reached.spent,
                    reached.reserved,
                    reached.needed
                ),
                (1000.0, 0.0, 800.0, 201.0)
            );
            // LLM_RESULT settles call 1 to what the provider counted.
            let result = NewEvent::of(&LlmResult {
                call_id: "llm_1_1".into(),
                usage: LlmUsage {
                    input_tokens: 30,
                    output_tokens: 10,
                },
                finish_reason: "stop".into(),
                cost: None,
                served_by: Some("main".into()),
                error: None,
            });
            let ack = writer.append(&outbox, vec![result]).await.unwrap();
            ack.await.unwrap().unwrap();
            let record = store.session(session.id).unwrap().unwrap();
            assert_eq!(
                (record.llm.input_tokens, record.llm.output_tokens),
                (30, 10)
            );
            assert_eq!(record.llm.reserved.len(), 1);
            // 40 spent + 400 reserved + 560 = 1000: fits exactly now.
            assert_eq!(reserve(3, 560).await.unwrap(), Reserved::Held);
            assert!(matches!(reserve(4, 1).await.unwrap(), Reserved::Refused(_)));
            // The turn ends with calls 2 and 3 unsettled: their worst cases
            // are charged, nothing stays reserved.
            (writer.finish_turn(session.id, ticket.turn, vec![], TurnOutcome::Errored))
                .await
                .unwrap();
            let record = store.session(session.id).unwrap().unwrap();
            assert!(record.llm.reserved.is_empty());
            assert_eq!(record.llm.unreported.tokens, 960);
        }
    }
}
