//! Operator verbs on the command line: the same actions as the console, for
//! scripts. Each writes to the database; a running scheduler honours it within
//! a tick.

use super::exit;
use super::trigger::report;
use crate::config::Config;
use crate::operator;
use crate::store::Store;
use crate::store::types::{RunFilter, RunState};
use crate::time::{Clock, SystemClock};
use std::path::Path;

/// `--by`, then `$USER`, then the OS account name, then `operator`.
fn actor(by: Option<&str>) -> String {
    operator::actor(by)
}

/// Opens the database for writing, runs an operator action, prints what it
/// says on success; refusals exit 1, an unopenable database 2.
fn act(config: &Path, db: Option<&Path>, f: impl FnOnce(&Store) -> operator::Result<String>) -> i32 {
    let (store, _) = match super::db::open_for_cli(config, db, true) {
        Ok(x) => x,
        Err(c) => return c,
    };
    done(f(&store))
}

/// Like [`act`], for actions that need the config (schedule ids).
fn act_on_schedule(
    config: &Path,
    db: Option<&Path>,
    f: impl FnOnce(&Store, &Config) -> operator::Result<String>,
) -> i32 {
    match super::db::open_for_cli(config, db, true) {
        Ok((store, Some(cfg))) => done(f(&store, &cfg)),
        Ok((_, None)) => needs_config(),
        Err(c) => c,
    }
}

fn done(outcome: operator::Result<String>) -> i32 {
    match outcome {
        Ok(text) => {
            println!("{text}");
            exit::OK
        }
        Err(e) => report(e),
    }
}

pub fn approve(
    config: &Path,
    db: Option<&Path>,
    run: i64,
    reason: &str,
    by: Option<&str>,
    resume_after: Option<&str>,
) -> i32 {
    let who = actor(by);
    match super::db::open_for_cli(config, db, true) {
        Ok((store, cfg)) => done(
            operator::approve_checked(
                &store,
                cfg.as_ref(),
                run,
                &who,
                reason,
                resume_after,
                SystemClock.now(),
            )
            .map(|r| {
                format!(
                    "run {run} approved by {who}; now {} ({})",
                    r.state,
                    r.state_reason.unwrap_or_default()
                )
            }),
        ),
        Err(c) => c,
    }
}

pub fn reject(config: &Path, db: Option<&Path>, run: i64, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    match super::db::open_for_cli(config, db, true) {
        Ok((store, cfg)) => done(
            operator::reject(&store, cfg.as_ref(), run, &who, reason, SystemClock.now())
                .map(|_| format!("run {run} rejected by {who}: failed")),
        ),
        Err(c) => c,
    }
}

/// `kill --tenant T`: every schedule of the tenant is paused (recorded as a
/// tenant kill with who and why); the global switch is untouched.
pub fn kill_tenant(config: &Path, db: Option<&Path>, tenant: &str, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    act_on_schedule(config, db, |store, cfg| {
        let why = format!("kill switch for tenant {tenant}: {reason}");
        let (paused, already) = operator::pause_tenant(store, cfg, tenant, &who, &why, SystemClock.now())?;
        if paused.is_empty() {
            return Err(operator::ActionError::Already(format!(
                "every schedule of tenant {tenant} is already paused ({}); the first reasons are kept",
                already.join(", ")
            )));
        }
        let mut text = format!(
            "tenant {tenant} killed by {who}: {} paused, nothing new of it is claimed",
            paused.join(", ")
        );
        if !already.is_empty() {
            text.push_str(&format!(
                "\nalready paused (first reason kept): {}",
                already.join(", ")
            ));
        }
        text.push_str(&format!("\nundo with `agentcron resume --tenant {tenant} --yes`"));
        Ok(text)
    })
}

pub fn kill(config: &Path, db: Option<&Path>, reason: &str, cancel_running: bool, by: Option<&str>) -> i32 {
    let who = actor(by);
    act(config, db, |store| {
        operator::kill(store, &who, reason, cancel_running, SystemClock.now())?;
        Ok(format!(
            "kill switch ON: nothing new will be claimed{}",
            if cancel_running {
                "; running attempts are being cancelled"
            } else {
                ""
            }
        ))
    })
}

pub fn unkill(config: &Path, db: Option<&Path>, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    act(config, db, |store| {
        operator::unkill(store, &who, reason, SystemClock.now())?;
        Ok("kill switch off".into())
    })
}

pub fn pause(config: &Path, db: Option<&Path>, schedule: &str, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    act_on_schedule(config, db, |store, cfg| {
        operator::pause(store, cfg, schedule, &who, reason, SystemClock.now())?;
        Ok(format!("{schedule} paused by {who}"))
    })
}

/// `pause --tenant T`: every schedule of the tenant.
pub fn pause_tenant(config: &Path, db: Option<&Path>, tenant: &str, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    act_on_schedule(config, db, |store, cfg| {
        let (paused, already) = operator::pause_tenant(store, cfg, tenant, &who, reason, SystemClock.now())?;
        if paused.is_empty() {
            return Err(operator::ActionError::Already(format!(
                "every schedule of tenant {tenant} is already paused ({}); the first reasons are kept",
                already.join(", ")
            )));
        }
        let mut text = format!("tenant {tenant}: {} paused by {who}", paused.join(", "));
        if !already.is_empty() {
            text.push_str(&format!(
                "\nalready paused (first reason kept): {}",
                already.join(", ")
            ));
        }
        Ok(text)
    })
}

/// `resume --tenant T`: each paused schedule of the tenant, as `resume` does.
pub fn resume_tenant(
    config: &Path,
    db: Option<&Path>,
    tenant: &str,
    yes: bool,
    reason: Option<&str>,
    by: Option<&str>,
) -> i32 {
    let cfg = match super::load_config(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let schedules = match operator::tenant_schedules(&cfg, tenant) {
        Ok(s) => s.into_iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        Err(e) => return report(e),
    };
    let mut code = exit::OK;
    for s in schedules {
        code = code.max(resume(config, db, &s, yes, reason, by));
    }
    code
}

pub fn resume(
    config: &Path,
    db: Option<&Path>,
    schedule: &str,
    yes: bool,
    reason: Option<&str>,
    by: Option<&str>,
) -> i32 {
    let (store, cfg) = match super::db::open_for_cli(config, db, true) {
        Ok((s, Some(c))) => (s, c),
        Ok((_, None)) => return needs_config(),
        Err(c) => return c,
    };
    let plan = match operator::resume_plan(&store, &cfg, schedule) {
        Ok(p) => p,
        Err(e) => return report(e),
    };
    if !plan.paused {
        println!("{schedule} is already resumed (not paused)");
        return exit::OK;
    }
    println!(
        "{schedule} is paused ({}).",
        plan.paused_reason.clone().unwrap_or_default()
    );
    if plan.held.is_empty() {
        println!("Resuming starts nothing at once; the next window opens on schedule.");
    } else {
        println!(
            "Resuming re-evaluates {} held window(s) at once, oldest first:",
            plan.held.len()
        );
        for (id, key, state, why) in &plan.held {
            println!("  run {id:>6}  {key:<28} {state:<10} {why}");
        }
    }
    if plan.lost_while_paused > 0 {
        println!(
            "{} window(s) were missed or expired while paused and will not run.",
            plan.lost_while_paused
        );
    }
    if !yes {
        eprintln!("not resumed: re-run with --yes to resume {schedule}");
        return exit::DOES_NOT_HOLD;
    }
    let reason = reason.unwrap_or("resumed from the command line");
    match operator::resume(&store, &cfg, schedule, &actor(by), reason, SystemClock.now()) {
        Ok(()) => {
            println!("{schedule} resumed");
            exit::OK
        }
        Err(e) => report(e),
    }
}

pub fn close_circuit(
    config: &Path,
    db: Option<&Path>,
    schedule: &str,
    reason: &str,
    by: Option<&str>,
) -> i32 {
    let who = actor(by);
    act_on_schedule(config, db, |store, cfg| {
        operator::close_circuit(store, cfg, schedule, &who, reason, SystemClock.now())?;
        Ok(format!("circuit of {schedule} closed"))
    })
}

pub fn maintenance_add(
    config: &Path,
    db: Option<&Path>,
    from: &str,
    to: &str,
    reason: &str,
    schedules: &[String],
) -> i32 {
    let (from, to) = match (super::next::parse_instant(from), super::next::parse_instant(to)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("agentcron maintenance add: {e}");
            return exit::USAGE;
        }
    };
    act(config, db, |store| {
        let id = operator::add_maintenance(
            store,
            from,
            to,
            reason,
            &operator::default_actor(),
            schedules,
            SystemClock.now(),
        )?;
        Ok(format!("maintenance window {id} added"))
    })
}

pub fn backfill(
    config: &Path,
    db: Option<&Path>,
    schedule: &str,
    from: &str,
    to: &str,
    dry_run: bool,
    json: bool,
) -> i32 {
    let (from, to) = match (super::next::parse_instant(from), super::next::parse_instant(to)) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("agentcron backfill: {e}");
            return exit::USAGE;
        }
    };
    let (store, cfg) = match super::db::open_for_cli(config, db, true) {
        Ok((s, Some(c))) => (s, c),
        Ok((_, None)) => return needs_config(),
        Err(c) => return c,
    };
    let plan = match operator::backfill(
        &store,
        &cfg,
        schedule,
        from,
        to,
        dry_run,
        &operator::default_actor(),
        SystemClock.now(),
    ) {
        Ok(p) => p,
        Err(e) => return report(e),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&plan).unwrap_or_default());
        return exit::OK;
    }
    let queued = plan.iter().filter(|w| w.action == "queue").count();
    let tz = super::db::block_zone(Some(&cfg), Some(schedule), false);
    println!("{:<28} {:<26} ACTION", "WINDOW", "START");
    for w in &plan {
        let action = match w.action.as_str() {
            "queue" if dry_run => "would queue (backfill pool)".to_string(),
            "queue" => "queued (backfill pool)".to_string(),
            "calendar_skipped" => "not a business day".to_string(),
            state => format!(
                "left alone: run {} is {state}",
                w.existing_run.unwrap_or_default()
            ),
        };
        println!(
            "{:<28} {:<26} {action}",
            w.window_key,
            crate::time::in_zone(&w.start, tz)
        );
    }
    if dry_run {
        println!(
            "dry run: {queued} of {} window(s) would be queued; nothing changed",
            plan.len()
        );
    } else {
        println!("{queued} of {} window(s) queued, oldest first", plan.len());
    }
    exit::OK
}

pub fn dlq_list(config: &Path, db: Option<&Path>, json: bool) -> i32 {
    let (store, _) = match super::db::open_for_cli(config, db, false) {
        Ok(x) => x,
        Err(c) => return c,
    };
    let runs = match store.read(|tx| {
        tx.runs(&RunFilter {
            states: vec![RunState::Dead],
            newest_first: true,
            ..RunFilter::default()
        })
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentcron: {e}");
            return exit::USAGE;
        }
    };
    if json {
        let rows: Vec<_> = runs
            .iter()
            .map(|r| {
                serde_json::json!({"id": r.id, "tenant": r.tenant, "schedule": r.schedule, "window_key": r.window_key,
                    "attempts": r.attempts, "error_class": r.error_class.map(|c| c.as_str()),
                    "last_error": r.last_error, "updated_at": crate::time::rfc3339(r.updated_at)})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows).unwrap_or_default());
        return exit::OK;
    }
    if runs.is_empty() {
        println!("the dead-letter queue is empty");
        return exit::OK;
    }
    println!(
        "{:>6}  {:<24} {:<26} {:>8}  LAST ERROR",
        "RUN", "SCHEDULE", "WINDOW", "ATTEMPTS"
    );
    for r in runs {
        println!(
            "{:>6}  {:<24} {:<26} {:>8}  {}",
            r.id,
            r.schedule,
            r.window_key,
            r.attempts,
            r.last_error.unwrap_or_default()
        );
    }
    exit::OK
}

/// `dlq requeue --schedule S --all --reason T`: every dead run of S.
pub fn dlq_requeue_all(
    config: &Path,
    db: Option<&Path>,
    schedule: &str,
    reason: &str,
    by: Option<&str>,
) -> i32 {
    let who = actor(by);
    act_on_schedule(config, db, |store, cfg| {
        let runs = operator::requeue_all_dead(store, cfg, schedule, &who, reason, SystemClock.now())?;
        if runs.is_empty() {
            return Ok(format!("{schedule} has no dead runs; nothing to requeue"));
        }
        let mut text = String::new();
        for r in &runs {
            text.push_str(&format!(
                "run {} ({}) requeued: retry_wait, due now\n",
                r.id, r.window_key
            ));
        }
        text.push_str(&format!(
            "{} dead run(s) of {schedule} requeued by {who}",
            runs.len()
        ));
        Ok(text)
    })
}

pub fn dlq_requeue(config: &Path, db: Option<&Path>, run: i64, reason: &str, by: Option<&str>) -> i32 {
    let who = actor(by);
    act(config, db, |store| {
        operator::requeue(store, run, &who, reason, SystemClock.now())?;
        Ok(format!("run {run} requeued by {who}: retry_wait, due now"))
    })
}

fn needs_config() -> i32 {
    eprintln!("agentcron: this verb needs the config (--config)");
    exit::USAGE
}
