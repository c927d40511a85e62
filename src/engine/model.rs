//! The engine's model of what it needs to decide: schedule states, running
//! counts, execution memory, catch-up backlogs, the runs it claimed, the
//! fencing counter, budgeted schedules' spend for the day. The engine owns
//! it and hands it to each of its transactions
//! ([`crate::store::Store::write_in`]); the ledger's writer keeps no state
//! between transactions (DESIGN.md, Storage). A transaction without it (a
//! CLI verb, the API, the console) reads everything afresh. The model runs
//! no SQL: the store reads and writes for it.

use crate::core::records::RunMemory;
use crate::store::Result;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The schedule states the engine's transactions last read or wrote, and
/// the counts of running runs, trusted only while nothing else has written
/// the ledger: each of the engine's transactions starts by asking SQLite
/// (`PRAGMA data_version`, which changes exactly when another connection —
/// another process, a CLI verb, another store on a shared in-memory
/// database — commits; PostgreSQL: the ledger's `write_seq`) and the store
/// whether any transaction but this model's own wrote on the same
/// connection, and forgets them all if either did. A transaction that rolls
/// back forgets them too. So the engine's claims and ends read a schedule's
/// state once, not at every run, and the running counts are counted once
/// and then kept up by claims and ends, not counted again at every end
/// (after an outage, 1,000 runs ending one after another each counted the
/// others); the writes still go to the database (write-through).
#[derive(Default)]
pub(crate) struct Model(Mutex<Kept>);

/// A schedule's execution memory as kept: shared with the dispatches that
/// read it.
type SharedMemory = std::sync::Arc<Vec<RunMemory>>;

#[derive(Default)]
struct Kept {
    /// `data_version` (PostgreSQL: `write_seq`) as last seen, and the
    /// store's count of commits that wrote, as of this model's last look or
    /// own commit.
    seen: Option<(i64, u64)>,
    states: crate::store::FastMap<String, crate::core::records::ScheduleState>,
    running: Option<std::sync::Arc<crate::store::types::RunningCounts>>,
    /// The run last read, with the connection's `total_changes` then: still
    /// the stored row while that count has not moved (no row written since
    /// on this connection) and no other connection committed (see
    /// [`Model::validate`]). An attempt's end reads its run to plan,
    /// then again as the transaction's conflict check.
    run: Option<(u64, crate::core::records::Run)>,
    /// The runs this connection inserted already claimed, as written, until
    /// anything writes their row again: an attempt's end plans from its
    /// run, and the run's read was 6 % of a drain's instructions. Every
    /// statement that may change a running run's row forgets it here
    /// (`Tx::transition_fenced`, `renew_lease`, `request_cancel`; a rename
    /// clears everything); another connection's commit or a rollback
    /// forgets them all.
    claimed: crate::store::FastMap<i64, crate::core::records::Run>,
    /// Catch-up backlogs by schedule as read or written here (`None`: it
    /// has none), kept up by this connection's writes (`Tx::put_backlog`,
    /// `advance_backlog`, `clear_backlog`; a rename or a dropped schedule
    /// forgets them): a drain reads its backlog at every window it queues.
    backlogs: crate::store::FastMap<String, Option<crate::store::Backlog>>,
    /// Execution memory by tenant, then schedule: how many runs were asked
    /// for when it was read, and the newest finished runs, newest window
    /// first (see [`Tx::execution_memory`]). Kept up by this connection's
    /// own writes ([`Model::run_finished`]).
    /// Shared with the dispatches that read it (an `Arc`, changed in place
    /// when no envelope holds it any more): a claim takes it without a copy.
    memory: crate::store::FastMap<String, crate::store::FastMap<String, (usize, SharedMemory)>>,
    /// The attempt this connection ended last: (run id, fencing token, its
    /// summary or else message), the word a run that ends with it leaves in
    /// the memory.
    ended: Option<(i64, i64, Option<String>)>,
    /// The fencing counter as this connection's transactions left it, and
    /// whether the open transaction moved it without writing it yet: a
    /// claim takes the next token from here (read once) and the counter's row
    /// is written once, when the transaction commits ([`Model::flush`]),
    /// not read and written at every claim.
    fencing: Option<(i64, bool)>,
    /// Spend by (tenant, schedule, from, to in ms): the cost of the
    /// schedule's attempts started in `[from, to)` as last read (a budgeted
    /// schedule's day, read at each of its runs' switches and ends).
    /// Forgotten whenever an attempt's usage is added here.
    costs: crate::store::FastMap<(String, String, i64, i64), f64>,
    /// Bumped whenever all of the above is forgotten (see
    /// [`EngineStore::generation`]).
    generation: u64,
}

impl Kept {
    fn forget_all(&mut self) {
        self.states.clear();
        self.running = None;
        self.run = None;
        self.claimed.clear();
        self.backlogs.clear();
        self.memory.clear();
        self.ended = None;
        self.fencing = None;
        self.costs.clear();
        self.generation += 1;
    }
}

impl Model {
    fn inner(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// At the start of a transaction, with the ledger's data version as its
    /// snapshot shows it (`version`) and the store's count of commits that
    /// wrote (`commits`): forget everything if another connection committed
    /// since the last look, or a transaction of this store not made with
    /// this model wrote.
    pub(crate) fn validate(&self, version: i64, commits: u64) {
        let mut c = self.inner();
        if c.seen != Some((version, commits)) {
            c.forget_all();
            c.seen = Some((version, commits));
        }
    }

    /// A transaction made with this model wrote and committed, the store's
    /// `commits`-th, leaving the ledger at `write_seq` (PostgreSQL; SQLite's
    /// `data_version` does not move for its own connection): what it keeps
    /// is still true there.
    pub(crate) fn saw(&self, write_seq: Option<i64>, commits: u64) {
        let mut c = self.inner();
        if let Some((version, _)) = c.seen {
            c.seen = Some((write_seq.unwrap_or(version), commits));
        }
    }

    pub(crate) fn get(&self, schedule: &str) -> Option<crate::core::records::ScheduleState> {
        self.inner().states.get(schedule).cloned()
    }

    /// The kept state's last success (`None`: not kept).
    #[allow(clippy::option_option)]
    pub(crate) fn last_success(&self, schedule: &str) -> Option<Option<chrono::DateTime<chrono::Utc>>> {
        self.inner().states.get(schedule).map(|st| st.last_success)
    }

    pub(crate) fn contains(&self, schedule: &str) -> bool {
        self.inner().states.contains_key(schedule)
    }

    /// Whether `st` is `st.schedule`'s state as kept but for its last
    /// success (every field named: one added must be compared here).
    pub(crate) fn differs_in_last_success_only(&self, st: &crate::core::records::ScheduleState) -> bool {
        self.inner().states.get(st.schedule.as_str()).is_some_and(|kept| {
            let crate::core::records::ScheduleState {
                schedule: _,
                last_evaluated,
                circuit,
                circuit_changed_at,
                consecutive_failures,
                paused,
                paused_reason,
                concurrency_divisor,
                last_start,
                last_success,
            } = st;
            kept.last_success != last_success.map(crate::store::sql::stored)
                && kept.last_evaluated == *last_evaluated
                && kept.circuit == *circuit
                && kept.circuit_changed_at == *circuit_changed_at
                && kept.consecutive_failures == *consecutive_failures
                && kept.paused == *paused
                && kept.paused_reason == *paused_reason
                && kept.concurrency_divisor == *concurrency_divisor
                && kept.last_start == *last_start
        })
    }

    /// Whether `st` is `st.schedule`'s state as kept.
    pub(crate) fn holds(&self, st: &crate::core::records::ScheduleState) -> bool {
        self.inner().states.get(st.schedule.as_str()) == Some(st)
    }

    /// `st` as the database now holds it (instants in whole milliseconds).
    pub(crate) fn put(&self, st: &crate::core::records::ScheduleState) {
        use crate::store::sql::stored;
        let mut st = st.clone();
        for t in [
            &mut st.last_evaluated,
            &mut st.circuit_changed_at,
            &mut st.last_start,
            &mut st.last_success,
        ] {
            *t = t.map(stored);
        }
        let mut c = self.inner();
        // Put again after every run's end: the kept key is not copied again.
        match c.states.get_mut(st.schedule.as_str()) {
            Some(kept) => *kept = st,
            None => {
                c.states.insert(st.schedule.clone(), st);
            }
        }
    }

    /// A write changed part of `schedule`'s row: the same change to the
    /// cached copy, if there is one.
    pub(crate) fn update(&self, schedule: &str, f: impl FnOnce(&mut crate::core::records::ScheduleState)) {
        if let Some(st) = self.inner().states.get_mut(schedule) {
            f(st);
        }
    }

    pub(crate) fn clear(&self) {
        self.inner().forget_all();
    }

    /// Forgets every read it keeps, but not the fencing counter a claim
    /// moved and the transaction has not written yet, nor the generation
    /// (nothing was written behind the engine's back): the oracle mode of
    /// [`EngineStore::forgetful`].
    fn forget_reads(&self) {
        let mut c = self.inner();
        let (fencing, generation, seen) = (c.fencing.filter(|(_, moved)| *moved), c.generation, c.seen);
        c.forget_all();
        c.fencing = fencing;
        c.generation = generation;
        c.seen = seen;
    }

    /// The fencing counter as kept, if it is.
    pub(crate) fn fencing(&self) -> Option<i64> {
        self.inner().fencing.map(|(t, _)| t)
    }

    /// The counter as read from the database (not moved yet).
    pub(crate) fn keep_fencing(&self, token: i64) {
        let mut c = self.inner();
        if c.fencing.is_none() {
            c.fencing = Some((token, false));
        }
    }

    /// A claim took `token`: the counter moves to it, written at commit.
    pub(crate) fn fencing_moved(&self, token: i64) {
        let mut c = self.inner();
        let now = c.fencing.map_or(token, |(t, _)| t.max(token));
        c.fencing = Some((now, true));
    }

    /// The fencing counter a claim moved and the open transaction has not
    /// written yet, if any (the store writes it before its commit and
    /// before any statement that reads it, then calls
    /// [`Model::fencing_written`]).
    pub(crate) fn fencing_unwritten(&self) -> Option<i64> {
        match self.inner().fencing {
            Some((token, true)) => Some(token),
            _ => None,
        }
    }

    /// The counter's row now holds `token`.
    pub(crate) fn fencing_written(&self, token: i64) {
        self.inner().fencing = Some((token, false));
    }

    pub(crate) fn generation(&self) -> u64 {
        self.inner().generation
    }

    /// The first `n` entries of the execution memory of `schedule`, if kept
    /// (read with at least `n`).
    pub(crate) fn memory(&self, tenant: &str, schedule: &str, n: usize) -> Option<SharedMemory> {
        let c = self.inner();
        let (read, entries) = c.memory.get(tenant)?.get(schedule)?;
        match (*read).cmp(&n) {
            // Kept at most `read` long: all of it.
            std::cmp::Ordering::Equal => Some(entries.clone()),
            std::cmp::Ordering::Greater => {
                Some(std::sync::Arc::new(entries.iter().take(n).cloned().collect()))
            }
            std::cmp::Ordering::Less => None,
        }
    }

    /// The execution memory of `schedule` as just read with `n`.
    pub(crate) fn keep_memory(&self, tenant: &str, schedule: &str, n: usize, entries: &SharedMemory) {
        self.inner()
            .memory
            .entry(tenant.to_string())
            .or_default()
            .insert(schedule.to_string(), (n, entries.clone()));
    }

    /// An attempt of run `run_id` ended with this word (summary, else message).
    pub(crate) fn attempt_ended(&self, run_id: i64, token: i64, word: Option<String>) {
        self.inner().ended = Some((run_id, token, word));
    }

    /// `run` (as now stored) just became finished (a terminal state) from
    /// an unfinished one, or was created finished: it joins its schedule's
    /// memory with its last attempt's word, else its state reason. When that
    /// word is not known here (its last attempt ended in another
    /// transaction), the schedule's memory is read again at its next use.
    pub(crate) fn run_finished(&self, run: &crate::core::records::Run) {
        let mut c = self.inner();
        let word = if run.attempts == 0 {
            Some(run.state_reason.clone())
        } else {
            match &c.ended {
                Some((id, token, word)) if *id == run.id && *token == run.fencing_token => {
                    Some(word.clone().or_else(|| run.state_reason.clone()))
                }
                _ => None,
            }
        };
        let Some(by_schedule) = c.memory.get_mut(&run.tenant) else {
            return;
        };
        let Some(summary) = word else {
            by_schedule.remove(&run.schedule);
            return;
        };
        let Some((n, entries)) = by_schedule.get_mut(&run.schedule) else {
            return;
        };
        let window_start = crate::store::sql::stored(run.window_start);
        // Copied only if a dispatch's envelope still holds it.
        let entries = std::sync::Arc::make_mut(entries);
        entries.retain(|e| e.run_id != run.id);
        let at = entries
            .iter()
            .position(|e| (e.window_start, e.run_id) < (window_start, run.id))
            .unwrap_or(entries.len());
        entries.insert(
            at,
            RunMemory {
                run_id: run.id,
                window_key: run.window_key.as_str().into(),
                window_start,
                state: run.state,
                summary: summary.map(Into::into),
            },
        );
        entries.truncate(*n);
    }

    /// Something changed the finished runs of `schedule` in a way not
    /// followed here (a finished run requeued): read its memory again.
    pub(crate) fn forget_memory(&self, tenant: &str, schedule: &str) {
        if let Some(by_schedule) = self.inner().memory.get_mut(tenant) {
            by_schedule.remove(schedule);
        }
    }

    /// Run `id` as last read, if nothing was written since (`changes`: the
    /// connection's `total_changes` now).
    pub(crate) fn run_as_read(&self, id: i64, changes: u64) -> Option<crate::core::records::Run> {
        let c = self.inner();
        c.run
            .as_ref()
            .filter(|(at, r)| *at == changes && r.id == id)
            .map(|(_, r)| r.clone())
    }

    /// Run `id` as this connection inserted it claimed, if nothing wrote
    /// its row since.
    pub(crate) fn claimed_run(&self, id: i64) -> Option<crate::core::records::Run> {
        self.inner().claimed.get(&id).cloned()
    }

    /// The claimed run kept for `id`, moved out of the cache.
    pub(crate) fn take_claimed(&self, id: i64) -> Option<crate::core::records::Run> {
        let mut c = self.inner();
        if c.claimed.is_empty() {
            return None;
        }
        c.claimed.remove(&id)
    }

    /// `run` as just inserted, already claimed.
    pub(crate) fn keep_claimed(&self, run: &crate::core::records::Run) {
        self.inner().claimed.insert(run.id, run.clone());
    }

    /// Run `id`'s row is written again (or may be): no longer as kept.
    pub(crate) fn forget_claimed(&self, id: i64) {
        let mut c = self.inner();
        if !c.claimed.is_empty() {
            c.claimed.remove(&id);
        }
    }

    /// The backlog of `schedule` as kept: `Some(None)` when it is known to
    /// have none, `None` when not kept.
    pub(crate) fn backlog(&self, schedule: &str) -> Option<Option<crate::store::Backlog>> {
        self.inner().backlogs.get(schedule).cloned()
    }

    /// `schedule`'s backlog as the database now holds it (`None`: none).
    pub(crate) fn keep_backlog(&self, schedule: &str, b: Option<crate::store::Backlog>) {
        use crate::store::sql::stored;
        let b = b.map(|b| crate::store::Backlog {
            next: stored(b.next),
            until: stored(b.until),
            planned_at: stored(b.planned_at),
            ..b
        });
        self.inner().backlogs.insert(schedule.to_string(), b);
    }

    /// `schedule`'s backlog may have changed: read it again.
    pub(crate) fn forget_backlog(&self, schedule: &str) {
        self.inner().backlogs.remove(schedule);
    }

    /// `run` as just read, when the connection's `total_changes` was `changes`.
    pub(crate) fn read_run(&self, changes: u64, run: &crate::core::records::Run) {
        self.inner().run = Some((changes, run.clone()));
    }

    pub(crate) fn running(&self) -> Option<std::sync::Arc<crate::store::types::RunningCounts>> {
        self.inner().running.clone()
    }

    pub(crate) fn keep_running(
        &self,
        counts: crate::store::types::RunningCounts,
    ) -> std::sync::Arc<crate::store::types::RunningCounts> {
        let counts = std::sync::Arc::new(counts);
        self.inner().running = Some(counts.clone());
        counts
    }

    /// A run of `schedule` in `pool` started (`up`) or stopped running.
    pub(crate) fn running_moved(
        &self,
        tenant: &str,
        schedule: &str,
        pool: crate::core::records::Pool,
        up: bool,
    ) {
        let mut c = self.inner();
        if let Some(counts) = c.running.as_mut()
            && !std::sync::Arc::make_mut(counts).add(tenant, schedule, pool, up)
        {
            c.running = None;
        }
    }

    /// The spend of `schedule` between `from` and `to` (ms) as kept.
    pub(crate) fn cost(&self, tenant: &str, schedule: &str, from: i64, to: i64) -> Option<f64> {
        let c = self.inner();
        if c.costs.is_empty() {
            return None;
        }
        c.costs
            .get(&(tenant.to_string(), schedule.to_string(), from, to))
            .copied()
    }

    /// The spend of `schedule` between `from` and `to` (ms) as just read.
    pub(crate) fn keep_cost(&self, tenant: &str, schedule: &str, from: i64, to: i64, spent: f64) {
        self.inner()
            .costs
            .insert((tenant.to_string(), schedule.to_string(), from, to), spent);
    }

    /// An attempt's usage was added: every kept spend may have moved.
    pub(crate) fn forget_costs(&self) {
        let mut c = self.inner();
        if !c.costs.is_empty() {
            c.costs.clear();
        }
    }

    /// Something changed running runs in a way not counted here.
    pub(crate) fn forget_running(&self) {
        self.inner().running = None;
    }
}

/// The engine's ledger: the store, and the model every transaction the
/// engine makes runs with. Anything else of the store is reached through it
/// (`Deref`), and writes without the model (which the model then notices).
pub struct EngineStore {
    store: std::sync::Arc<crate::store::Store>,
    model: Model,
    /// Forget every read before each transaction and each step of one (see
    /// [`EngineStore::forgetful`]).
    forgetful: bool,
}

impl EngineStore {
    pub fn new(store: std::sync::Arc<crate::store::Store>) -> Self {
        Self {
            store,
            model: Model::default(),
            forgetful: false,
        }
    }

    /// The model's oracle: a store whose model forgets every read before
    /// each of the engine's calls, so every fact comes from the ledger. A
    /// rehearsal run with it must end exactly as one run with the model
    /// (`tests/engine_model.rs`); no scheduler runs with it.
    pub fn forgetful(store: std::sync::Arc<crate::store::Store>) -> Self {
        Self {
            forgetful: true,
            ..Self::new(store)
        }
    }

    /// The model, forgetful first if this is the oracle.
    fn model(&self) -> &Model {
        if self.forgetful {
            self.model.forget_reads();
        }
        &self.model
    }

    /// The store itself, to share.
    pub fn shared(&self) -> &std::sync::Arc<crate::store::Store> {
        &self.store
    }

    /// [`crate::store::Store::write`] with the model.
    pub fn write<T>(&self, f: impl FnOnce(&crate::store::Tx) -> Result<T>) -> Result<T> {
        self.store.write_in(Some(self.model()), f)
    }

    /// [`crate::store::Store::read`] with the model.
    pub fn read<T>(&self, f: impl FnOnce(&crate::store::Tx) -> Result<T>) -> Result<T> {
        self.store.read_in(Some(self.model()), f)
    }

    /// [`crate::store::Store::batch`] with the model.
    pub fn batch<T, E: From<crate::store::StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.store.batch_in(Some(self.model()), f)
    }

    /// Changes whenever the model forgot what it kept (another process
    /// wrote, a transaction rolled back): while it stays the same, nothing
    /// was written behind the engine's back since.
    pub fn generation(&self) -> u64 {
        self.model.generation()
    }
}

impl std::ops::Deref for EngineStore {
    type Target = crate::store::Store;

    fn deref(&self) -> &crate::store::Store {
        &self.store
    }
}
