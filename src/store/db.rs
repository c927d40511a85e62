//! Opening the file, connection settings, and the two ways in: [`Store::write`]
//! (`BEGIN IMMEDIATE`, with bounded retries when another process holds the
//! write lock) and [`Store::read`] (a deferred read snapshot).

use super::{Result, StoreError, schema};
use crate::core::machine::RunState;
use crate::engine::model::Model;
use rusqlite::{Connection, ErrorCode, OpenFlags};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long SQLite itself waits for a lock before reporting SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The busy timeout: `AGENTCRON_BUSY_TIMEOUT_MS` if set (operators on slow
/// disks, tests), else [`BUSY_TIMEOUT`].
fn busy_timeout() -> Duration {
    std::env::var("AGENTCRON_BUSY_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(BUSY_TIMEOUT)
}
/// After SQLite gave up, `write` tries this many more times before `Locked`.
const LOCK_RETRIES: u32 = 5;
/// First backoff between lock retries; doubles each time.
const LOCK_BACKOFF: Duration = Duration::from_millis(20);
/// Enough for every statement the store prepares plus the filter variants.
const STATEMENT_CACHE: usize = 128;
/// Pages of 16 KiB (not 4 KiB) for a database in memory (rehearsals). When
/// SQLite rebalances a b-tree it parks a page for a moment at the page
/// number past the 1 GiB lock byte; at commit, a page cache that has seen
/// that number is scanned whole, and an in-memory database's cache is the
/// whole database: under 1 GiB every such commit walked every page (24 % of
/// the outage drain). A quarter as many pages is a quarter of that walk
/// (month bench 22.6 → 19.6 s, drain −14 %; 64 KiB pages made the drain no
/// faster). Files keep 4 KiB: their cache is bounded, and bigger pages
/// would make every commit write more WAL.
const MEMORY_PAGE_SIZE: &str = "PRAGMA page_size = 16384;";

/// A `file:` URI naming a database in memory (`mode=memory`, as rehearsals
/// use).
fn is_memory_uri(path: &Path) -> bool {
    let p = path.to_string_lossy();
    p.starts_with("file:") && p.contains("mode=memory")
}

/// Durable at every commit against a process crash, fsync only at checkpoints
/// (WAL + NORMAL). Checkpointing every 10 000 pages instead of SQLite's 1 000
/// writes hot pages (the due index, the fencing row) far less often; the WAL is
/// cut back to 64 MiB after a checkpoint. A 16 MiB page cache keeps the hot
/// indexes in memory.
/// Statement journals (a statement that fails midway rolls back alone) are
/// kept in memory, not in a temporary file: they were a fifth of a
/// lifecycle's time.
const TUNING: &str = "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; \
     PRAGMA wal_autocheckpoint = 10000; PRAGMA journal_size_limit = 67108864; \
     PRAGMA cache_size = -16384; PRAGMA temp_store = MEMORY;";

/// Configures SQLite before its first connection: its memory statistics
/// off (with them on, every allocation and free inside SQLite takes a
/// global mutex to keep counters nobody reads: a twentieth of a lifecycle's
/// time, measured) and, on Linux, its allocations through the process's
/// allocator ([`sqlite_alloc`]).
///
/// `sqlite3_config` must not race another thread's first
/// `sqlite3_initialize` (an allocator swapped under a half-initialised
/// SQLite would free a C-library block through the new one), so on Linux it
/// runs from `.init_array`, when the program is loaded, before `main` and
/// before any thread exists ([`CONFIGURE_AT_LOAD`]). Elsewhere the store
/// turns the statistics off once before its first connection and SQLite
/// keeps the C library's malloc (that call is a harmless no-op, returning
/// SQLITE_MISUSE, if something else initialised SQLite first).
fn configure_sqlite() {
    #[cfg(target_os = "linux")]
    {
        // The reference keeps the object holding the `.init_array` entry
        // in every program that opens a store (the linker takes an rlib's
        // objects only when something names them).
        std::hint::black_box(&CONFIGURE_AT_LOAD);
    }
    #[cfg(not(target_os = "linux"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: an int argument as SQLITE_CONFIG_MEMSTATUS expects; if
            // SQLite is already initialized it returns SQLITE_MISUSE and
            // changes nothing.
            unsafe {
                rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int);
            }
        });
    }
}

/// Run by the loader before `main` (see [`configure_sqlite`]).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static CONFIGURE_AT_LOAD: extern "C" fn() = configure_at_load;

#[cfg(target_os = "linux")]
extern "C" fn configure_at_load() {
    // SAFETY: called once by the loader while the process has one thread and
    // before anything could have initialised SQLite; an int argument as
    // SQLITE_CONFIG_MEMSTATUS expects and a pointer to a complete
    // sqlite3_mem_methods as SQLITE_CONFIG_MALLOC expects (SQLite copies it
    // before returning). Neither allocates.
    unsafe {
        rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int);
        let methods = sqlite_alloc::methods();
        rusqlite::ffi::sqlite3_config(
            rusqlite::ffi::SQLITE_CONFIG_MALLOC,
            &methods as *const rusqlite::ffi::sqlite3_mem_methods,
        );
    }
}

/// SQLite's allocations through Rust's global allocator (mimalloc in the
/// binary and the benches) instead of the C library's malloc: an in-memory
/// database's rollback journal takes a chunk per KiB it journals and frees
/// them all at the commit, and glibc's malloc and free were 13 % of an
/// outage drain's instructions (callgrind, `outage 10`). Each block carries
/// its size in an 8-byte header (SQLite asks for sizes back and needs 8-byte
/// alignment).
#[cfg(target_os = "linux")]
mod sqlite_alloc {
    use rusqlite::ffi::sqlite3_mem_methods;
    use std::alloc::{Layout, alloc, dealloc, realloc};
    use std::ffi::{c_int, c_void};

    const HEADER: usize = 8;

    /// The methods for SQLITE_CONFIG_MALLOC (SQLite copies them).
    pub(super) fn methods() -> sqlite3_mem_methods {
        sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        }
    }

    /// The layout of a block holding `n` bytes for SQLite.
    fn layout(n: usize) -> Option<Layout> {
        Layout::from_size_align(n.checked_add(HEADER)?, HEADER).ok()
    }

    /// The block SQLite's pointer `p` is in, and the bytes SQLite asked for.
    ///
    /// # Safety
    /// `p` was returned by [`x_malloc`] or [`x_realloc`] and not freed.
    unsafe fn block(p: *mut c_void) -> (*mut u8, usize) {
        // SAFETY: per the contract, the header sits HEADER bytes before `p`
        // in the same allocation and holds the size written there.
        unsafe {
            let base = p.cast::<u8>().sub(HEADER);
            (base, base.cast::<u64>().read() as usize)
        }
    }

    /// Writes the size into a new block's header; SQLite's pointer.
    ///
    /// # Safety
    /// `base` is null or a live block of at least `HEADER + n` bytes, 8-aligned.
    unsafe fn hand_out(base: *mut u8, n: usize) -> *mut c_void {
        if base.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: per the contract, the header's 8 aligned bytes are in the block.
        unsafe {
            base.cast::<u64>().write(n as u64);
            base.add(HEADER).cast()
        }
    }

    unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
        let Some(l) = usize::try_from(n).ok().and_then(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: the layout's size is at least HEADER (non-zero); the block
        // returned (or null) is HEADER + n bytes, 8-aligned.
        unsafe { hand_out(alloc(l), l.size() - HEADER) }
    }

    unsafe extern "C" fn x_free(p: *mut c_void) {
        if p.is_null() {
            return;
        }
        // SAFETY: SQLite frees only what its xMalloc / xRealloc returned, once;
        // the layout is the one the block was allocated with.
        unsafe {
            let (base, n) = block(p);
            if let Some(l) = layout(n) {
                dealloc(base, l);
            }
        }
    }

    unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        if p.is_null() {
            // SAFETY: as for any new block.
            return unsafe { x_malloc(n) };
        }
        let Some(new) = usize::try_from(n).ok().and_then(layout) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `p` is a live block of ours (SQLite's contract); it is
        // reallocated with the layout it has, to a non-zero size of the
        // same alignment; on failure it is left as it was (null returned).
        unsafe {
            let (base, old) = block(p);
            let Some(l) = layout(old) else {
                return std::ptr::null_mut();
            };
            hand_out(realloc(base, l, new.size()), new.size() - HEADER)
        }
    }

    unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
        if p.is_null() {
            return 0;
        }
        // SAFETY: SQLite asks only for blocks of ours that are live.
        let (_, n) = unsafe { block(p) };
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
        n.saturating_add(7) & !7
    }

    unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
        rusqlite::ffi::SQLITE_OK
    }

    unsafe extern "C" fn x_shutdown(_: *mut c_void) {}
}

/// The SQLite store. `Send + Sync`: share one across threads (calls serialize on
/// its connection) or open one per thread/process on the same file.
pub struct Store {
    /// Before `conn`: fields drop in order, and every statement must be
    /// finalized before its connection closes.
    stmts: Statements,
    /// The ledger's connection: SQLite's, or a PostgreSQL session.
    conn: Mutex<Db>,
    /// Whether `conn` is a PostgreSQL session.
    postgres: bool,
    path: Option<PathBuf>,
    counts: RunCounts,
    /// Commits on this connection that wrote, with the engine's model or
    /// without (see [`crate::engine::model::Model::validate`]): SQLite's
    /// `data_version` does not move for this connection's own commits.
    commits: std::sync::atomic::AtomicU64,
    /// Set by [`Store::checkpoint_in_background`]: told after each commit.
    checkpointer: std::sync::OnceLock<std::sync::mpsc::SyncSender<()>>,
    /// The checkpointer's thread, joined when the store drops (see `Drop`).
    checkpoint_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The file [`Store::open`] opened (device, inode), which
    /// [`Store::check_file`] compares the path against.
    opened: Option<super::file::FileId>,
}

/// A store's connection to its ledger.
enum Db {
    /// Boxed: the held statements point at the connection, which must not
    /// move when the store does.
    Lite(Box<Connection>),
    Pg(super::pg::session::PgSession),
}

/// The background checkpointer copies the WAL into the database once it has
/// grown past this many bytes (16 MiB)…
const CHECKPOINT_AT_BYTES: u64 = 16 << 20;
/// …once no commit came for this long (the writer's burst of claim chunks is
/// over)…
const CHECKPOINT_QUIET: Duration = Duration::from_millis(20);
/// …or this long after it grew past it, commits or not…
const CHECKPOINT_WAITS_AT_MOST: Duration = Duration::from_millis(500);
/// …and the writer's own automatic checkpoint (on the commit path) is kept
/// only as the backstop, at 64 Ki pages (256 MiB), for a WAL the background
/// checkpoint cannot catch up with.
const BACKSTOP_AUTOCHECKPOINT_PAGES: u32 = 65_536;

/// A store's checkpointer ends, and its connection closes, before the
/// store's own connection closes and before the drop returns: two
/// connections to one file closing at once in one process can deadlock
/// inside SQLite's unix VFS (a close takes its global mutex, then the
/// file's; a WAL close's exclusive lock takes the file's, then the global),
/// which hung a test whose four stores closed as their checkpointers did.
impl Drop for Store {
    fn drop(&mut self) {
        // Dropping the sender ends the thread's loop.
        drop(self.checkpointer.take());
        let thread = self
            .checkpoint_thread
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// A transaction's closure that panics rolls back: what the store kept for
/// it (counts, the fencing counter, reads) goes too,
/// or the next transaction on this connection would write it.
struct ForgetOnPanic<'s>(&'s Store, &'s Model);

impl Drop for ForgetOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.counts.clear();
            self.1.clear();
        }
    }
}

/// How the open transaction changed the number of runs in each state: added
/// to `run_counts` once, just before it commits (one statement per state
/// that changed, not two trigger statements per run), dropped if it rolls
/// back. Every change of a run's state goes through `insert_run`,
/// `transition` or `claim`, which record it here.
#[derive(Default)]
pub(crate) struct RunCounts(Mutex<[i64; RunState::ALL.len()]>);

impl RunCounts {
    fn slot(state: RunState) -> usize {
        RunState::ALL.iter().position(|s| *s == state).unwrap_or(0)
    }

    fn deltas(&self) -> MutexGuard<'_, [i64; RunState::ALL.len()]> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A run entered `to` (from `from`, or new).
    pub(crate) fn moved(&self, from: Option<RunState>, to: RunState) {
        if from == Some(to) {
            return;
        }
        let mut d = self.deltas();
        if let Some(from) = from {
            d[Self::slot(from)] -= 1;
        }
        d[Self::slot(to)] += 1;
    }

    /// The open transaction's change to the count of `state`, not yet in
    /// `run_counts` (on PostgreSQL its triggers have put it there already:
    /// `pg`, nothing is pending).
    pub(crate) fn pending(&self, state: RunState, pg: bool) -> i64 {
        if pg {
            return 0;
        }
        self.deltas()[Self::slot(state)]
    }

    fn clear(&self) {
        *self.deltas() = [0; RunState::ALL.len()];
    }

    /// Writes the changes into `run_counts` (inside the transaction) and
    /// forgets them.
    fn flush(&self, conn: super::exec::Conn<'_>) -> Result<()> {
        let d = std::mem::take(&mut *self.deltas());
        if conn.pg().is_some() {
            // PostgreSQL's triggers keep `run_counts` (every writer's).
            return Ok(());
        }
        for (state, n) in RunState::ALL.iter().zip(d) {
            if n != 0 {
                conn.exec(
                    super::exec::stmt!(ledger::ADD_RUN_COUNT),
                    rusqlite::params![state, n],
                )?;
            }
        }
        Ok(())
    }
}

thread_local! {
    /// The open [`Store::batch`] of this thread: (store, its locked
    /// connection, the model its transaction runs with).
    static BATCH: std::cell::Cell<Option<(*const Store, *const Db, *const Model)>> =
        const { std::cell::Cell::new(None) };
}

/// The transaction-control statements, run on statements the store keeps
/// prepared ([`Statements`]): `execute_batch` parsed and prepared each anew,
/// two per transaction (about 4 % of an outage drain's instructions, whose
/// ticks run many small transactions).
const BEGIN_IMMEDIATE: &str = "BEGIN IMMEDIATE";
const BEGIN_DEFERRED: &str = "BEGIN DEFERRED";
const COMMIT: &str = "COMMIT";
const ROLLBACK: &str = "ROLLBACK";

/// An open transaction of a store's connection: rolled back when dropped
/// unless committed (a panic unwinding through it included), as rusqlite's
/// `Transaction`, but on the store's kept statements.
struct Open<'s> {
    conn: super::exec::Conn<'s>,
    /// The connection's changed rows when the transaction began (PostgreSQL
    /// uses it, see [`Open::commit`]).
    changes: u64,
}

impl<'s> Open<'s> {
    /// `BEGIN IMMEDIATE` (`immediate`) or `BEGIN DEFERRED`. An immediate
    /// begin that finds the database locked beyond busy_timeout is retried a
    /// few times with growing backoff, then [`StoreError::Locked`].
    fn begin(conn: super::exec::Conn<'s>, immediate: bool) -> Result<Open<'s>> {
        // PostgreSQL's writer waits for its lock in the server: no retries here.
        if conn.pg().is_some() || !immediate {
            control(
                conn,
                if immediate {
                    BEGIN_IMMEDIATE
                } else {
                    BEGIN_DEFERRED
                },
            )?;
            return Ok(Open {
                conn,
                changes: conn.total_changes(),
            });
        }
        let started = Instant::now();
        let mut retries = 0;
        let mut backoff = LOCK_BACKOFF;
        loop {
            match control(conn, BEGIN_IMMEDIATE) {
                Ok(()) => {
                    return Ok(Open {
                        conn,
                        changes: conn.total_changes(),
                    });
                }
                Err(StoreError::Sqlite(e)) if is_busy(&e) => {
                    if retries == LOCK_RETRIES {
                        return Err(StoreError::Locked {
                            waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    retries += 1;
                    // Lock backoff is the one place the store sleeps.
                    std::thread::sleep(backoff);
                    backoff *= 2;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `COMMIT`; on an error the transaction is rolled back (as it is dropped).
    /// On PostgreSQL a transaction that changed rows first moves the ledger's
    /// `write_seq` on (SQLite's `data_version`, see [`Model::validate`]).
    /// A transaction that wrote is counted in the store's `commits`, and
    /// `model` (if it ran with one) learns both.
    fn commit(self, store: &Store, model: Option<&Model>) -> Result<()> {
        let mut left = None;
        let wrote = self.conn.total_changes() != self.changes;
        if self.conn.pg().is_some() && wrote {
            left = self.conn.opt(
                super::exec::Sql::Text(super::pg::session::BUMP_WRITE_SEQ),
                &[],
                |r| r.get::<i64>(0),
            )?;
        }
        control(self.conn, COMMIT)?;
        std::mem::forget(self);
        if wrote {
            let n = store.commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            if let Some(model) = model {
                model.saw(left, n);
            }
        }
        Ok(())
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        // A failed COMMIT may have ended the transaction already.
        let open = match self.conn {
            super::exec::Conn::Lite { conn, .. } => !conn.is_autocommit(),
            super::exec::Conn::Pg(_) => true,
        };
        if open {
            let _ = control(self.conn, ROLLBACK);
        }
    }
}

/// The ledger's data version as this transaction's snapshot shows it:
/// SQLite's `PRAGMA data_version`, which changes exactly when another
/// connection commits; PostgreSQL's `write_seq`, moved on by every
/// transaction that changed rows (see [`Open::commit`]).
fn data_version(conn: super::exec::Conn<'_>) -> Result<i64> {
    Ok(match conn {
        super::exec::Conn::Lite { conn, .. } => conn
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?,
        super::exec::Conn::Pg(_) => conn
            .opt(super::exec::Sql::Text(super::pg::session::WRITE_SEQ), &[], |r| {
                r.get::<i64>(0)
            })?
            .unwrap_or(-1),
    })
}

/// Writes the fencing counter `model` moved and has not written yet, if
/// any: before a commit, and before any statement that reads the counter.
pub(crate) fn flush_fencing(conn: super::exec::Conn<'_>, model: &Model) -> Result<()> {
    if let Some(token) = model.fencing_unwritten() {
        conn.exec(super::exec::stmt!(ledger::SET_FENCING), rusqlite::params![token])?;
        model.fencing_written(token);
    }
    Ok(())
}

/// A transaction made with `model` joined a batch made with another (or
/// none): it runs with the batch's, and `model` forgets what it keeps now,
/// not only at its next transaction (its generation moves with it).
fn forget_if_other(model: Option<&Model>, batch: &Model) {
    if let Some(m) = model
        && !std::ptr::eq(m, batch)
    {
        m.clear();
    }
}

/// Whether `e` is SQLite's "the database is locked".
fn busy(e: &StoreError) -> bool {
    matches!(e, StoreError::Sqlite(e) if is_busy(e))
}

/// Runs one of the transaction-control statements above. On PostgreSQL a
/// writing transaction first takes the ledger's write lock (see
/// [`super::pg::session::BEGIN_WRITE`]); a reading one reads one snapshot.
fn control(conn: super::exec::Conn<'_>, sql: &'static str) -> Result<()> {
    match conn {
        super::exec::Conn::Pg(pg) => pg.batch(match sql {
            BEGIN_IMMEDIATE => super::pg::session::BEGIN_WRITE,
            BEGIN_DEFERRED => super::pg::session::BEGIN_READ,
            other => other,
        }),
        super::exec::Conn::Lite { conn, stmts } => {
            stmts.get(conn, sql)?.execute([])?;
            Ok(())
        }
    }
}

/// How many readings of the database's clock [`Store::database_offset_ms`]
/// takes.
pub const CLOCK_READINGS: usize = 5;

/// The database's clock against this machine's: `offset_ms` ahead, read in
/// a round trip of `round_trip_ms` (the offset is right within half of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    pub offset_ms: i64,
    pub round_trip_ms: i64,
}

/// Of (before, database, after) readings in ms, the one with the shortest
/// round trip, as an offset from the round trip's middle.
fn best_reading(readings: &[(i64, i64, i64)]) -> Option<ClockReading> {
    readings
        .iter()
        .map(|&(before, db, after)| {
            let round_trip_ms = (after - before).max(0);
            ClockReading {
                offset_ms: db - (before + round_trip_ms / 2),
                round_trip_ms,
            }
        })
        .min_by_key(|r| r.round_trip_ms)
}

/// A handle inside one transaction; every query lives here so callers can batch
/// several in one atomic unit.
/// The store's prepared statements for its fixed SQL, keyed by where the
/// `&'static str` is (address and length): rusqlite's own cache keys by the
/// text, so every use hashed the SQL twice and copied it once (about 4 % of
/// a lifecycle, at some 18 statements each). Only used under the
/// connection's lock; SQL built at run time still goes through rusqlite's
/// cache.
#[derive(Default)]
pub(crate) struct Statements(
    // Hashed with FxHash's step: a statement is taken out and put back at
    // every use, where SipHash was most of the cost of the cache.
    Mutex<super::FastMap<(usize, usize), Held>>,
);

/// A prepared statement of the store's connection, kept between uses.
struct Held(rusqlite::Statement<'static>);

// SAFETY: a held statement is only taken out and used by a thread that holds
// the store's connection lock (through a `Tx`), like the connection itself
// (which is Send); SQLite's serialized threading mode (the bundled build)
// allows a connection and its statements to move between threads.
unsafe impl Send for Held {}

/// A statement taken from [`Statements`], put back when dropped.
pub(crate) struct Cached<'c> {
    stmt: Option<rusqlite::Statement<'c>>,
    key: (usize, usize),
    home: &'c Statements,
}

impl Statements {
    pub(crate) fn get<'c>(&'c self, conn: &'c Connection, sql: &'static str) -> rusqlite::Result<Cached<'c>> {
        let key = (sql.as_ptr() as usize, sql.len());
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
        let stmt = match held {
            Some(Held(stmt)) => stmt,
            None => conn.prepare_with_flags(sql, rusqlite::PrepFlags::SQLITE_PREPARE_PERSISTENT)?,
        };
        Ok(Cached {
            stmt: Some(stmt),
            key,
            home: self,
        })
    }
}

impl<'c> std::ops::Deref for Cached<'c> {
    type Target = rusqlite::Statement<'c>;
    fn deref(&self) -> &Self::Target {
        self.stmt
            .as_ref()
            .expect("a cached statement is present until dropped")
    }
}

impl std::ops::DerefMut for Cached<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.stmt
            .as_mut()
            .expect("a cached statement is present until dropped")
    }
}

impl Drop for Cached<'_> {
    fn drop(&mut self) {
        if let Some(stmt) = self.stmt.take() {
            // Its bindings are left as they are (a copy of what was bound,
            // freed or replaced at its next use, which binds every
            // parameter again): clearing them was a hundredth of a
            // lifecycle's instructions.
            // SAFETY: the statement belongs to the store's connection, which
            // outlives every held statement (`Store::stmts` drops first); it
            // is only used again through `Statements::get` under the
            // connection's lock, where it gets that borrow's lifetime back.
            let stmt: rusqlite::Statement<'static> = unsafe { std::mem::transmute(stmt) };
            self.home
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(self.key, Held(stmt));
        }
    }
}

pub struct Tx<'a> {
    /// The connection it runs on: SQLite's or a PostgreSQL session.
    pub(crate) on: super::exec::Conn<'a>,
    pub(crate) counts: &'a RunCounts,
    /// The engine's model (or one for this transaction alone).
    pub(crate) model: &'a Model,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// Names an error met while opening: not a database, cannot open, locked.
fn open_error(path: &str, e: StoreError) -> StoreError {
    let StoreError::Sqlite(inner) = e else {
        return e;
    };
    match inner.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_string(),
            message: inner.to_string(),
        },
        Some(
            ErrorCode::CannotOpen
            | ErrorCode::PermissionDenied
            | ErrorCode::ReadOnly
            | ErrorCode::SystemIoFailure,
        ) => StoreError::Open {
            path: path.to_string(),
            message: inner.to_string(),
        },
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Locked {
            waited_ms: busy_timeout().as_millis() as u64,
        },
        _ => StoreError::Sqlite(inner),
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Whether we may create files beside `path` (its `-shm`, `-wal`).
fn folder_writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(folder.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: access(2) with a valid NUL-terminated path; it only checks.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// `file:PATH?immutable=1`, with the characters a URI path cannot hold escaped.
fn immutable_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'?' | b'#' | b'%' => uri.push_str(&format!("%{b:02X}")),
            _ if b.is_ascii() && !b.is_ascii_control() => uri.push(char::from(b)),
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

impl Store {
    /// Opens (creating if missing) the file: WAL, synchronous=NORMAL,
    /// foreign_keys, busy_timeout 5 s, then brings the schema up to date.
    /// A newer schema → [`StoreError::TooNew`]; not an SQLite file or another
    /// program's database → [`StoreError::Corrupt`]; cannot create or open →
    /// [`StoreError::Open`].
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_file(path, true)
    }

    /// [`Store::open`]; without `create`, a missing file is not made.
    fn open_file(path: &Path, create: bool) -> Result<Store> {
        if let Some(url) = path.to_str().filter(|p| super::pg::is_url(p)) {
            return Self::open_postgres(url, super::pg::password_file());
        }
        configure_sqlite();
        let name = display(path);
        let mut flags = OpenFlags::default();
        if !create {
            flags.remove(OpenFlags::SQLITE_OPEN_CREATE);
        }
        let mut conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(&name, e.into()))?;
        let setup = (|| -> Result<()> {
            conn.busy_timeout(busy_timeout())?;
            // Whose file is it? Asked by reading only (a non-database fails
            // here): another program's database is refused before anything —
            // not even the switch to WAL — is written to it.
            schema::check_owner_read(&conn, &name)?;
            if is_memory_uri(path) {
                // Before the first table; a no-op on a database already made.
                conn.execute_batch(MEMORY_PAGE_SIZE)?;
            }
            // Two processes opening a new file at once both switch it to WAL,
            // and SQLite answers one of them SQLITE_BUSY at once, without
            // waiting (waiting would deadlock): the other's switch is done in
            // a moment, so try again.
            let mut tries = 0;
            loop {
                match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                    Ok(_) => break,
                    Err(e) if is_busy(&e) && tries < 50 => {
                        tries += 1;
                        std::thread::sleep(LOCK_BACKOFF);
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            conn.execute_batch(TUNING)?;
            schema::migrate(&mut conn, &name)
        })();
        setup.map_err(|e| open_error(&name, e))?;
        let mut store = Self::from_conn(conn, Some(path.to_path_buf()));
        // A database in memory (a rehearsal's URI) has no file to watch.
        if !is_memory_uri(path) {
            store.opened = super::file::FileId::of(path);
        }
        Ok(store)
    }

    /// Opens a ledger file that exists, as [`Store::open`] does, never
    /// creating one: a missing file is [`StoreError::NoLedger`]. For the CLI
    /// verbs, which act on the ledger a scheduler keeps; a verb that made an
    /// empty one would act where no scheduler looks. A PostgreSQL URL is
    /// opened as by [`Store::open`].
    pub fn open_existing(path: &Path) -> Result<Store> {
        let is_url = path.to_str().is_some_and(super::pg::is_url);
        if !is_url && !is_memory_uri(path) && !path.exists() {
            return Err(StoreError::NoLedger { path: display(path) });
        }
        // Not created if it went away since.
        Self::open_file(path, false)
    }

    /// The file this store opened (see [`Store::check_file`]).
    pub(super) fn file_id(&self) -> Option<super::file::FileId> {
        self.opened
    }

    /// `e`, named [`StoreError::DiskFull`] when it says the ledger's disk is full.
    fn classify(&self, e: StoreError) -> StoreError {
        super::file::classify(self.path.as_deref(), e)
    }

    /// Opens an existing file for reading only (`--read-only` consoles, CLI
    /// reads): nothing is migrated or written. A missing file, a file without
    /// the schema, or an older schema → [`StoreError::Open`] saying so.
    ///
    /// A WAL database needs its `-shm` file even to be read; in a folder the
    /// user cannot write (a `0444` file in a `0555` folder) it cannot be made,
    /// so such a file is read as immutable: a snapshot without locks, which
    /// is right for it — nobody who could change it can have it open there
    /// without that file.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if let Some(url) = path.to_str().filter(|p| super::pg::is_url(p)) {
            return Self::connect_postgres(url, super::pg::password_file(), false);
        }
        configure_sqlite();
        let name = display(path);
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let open = |target: &str, flags: OpenFlags| -> Result<Connection> {
            let conn = Connection::open_with_flags(target, flags).map_err(|e| open_error(&name, e.into()))?;
            let setup = (|| -> Result<()> {
                conn.busy_timeout(busy_timeout())?;
                conn.execute_batch("PRAGMA query_only = ON;")?;
                schema::check_read_only(&conn, &name)
            })();
            setup.map_err(|e| open_error(&name, e))?;
            Ok(conn)
        };
        let conn = match open(&name, flags) {
            Ok(conn) => conn,
            Err(StoreError::Open { .. } | StoreError::Sqlite(_)) if !folder_writable(path) => {
                open(&immutable_uri(path), flags | OpenFlags::SQLITE_OPEN_URI)?
            }
            Err(e) => return Err(e),
        };
        Ok(Self::from_conn(conn, Some(path.to_path_buf())))
    }

    /// Connects to the PostgreSQL ledger at `url` (its password from the
    /// URL, `PGPASSWORD` or `password_file`) and brings its schema up to
    /// date; a newer or foreign schema is refused, the database untouched.
    /// The store's statements run there, each writing transaction in its
    /// turn (see [`super::pg::session::BEGIN_WRITE`]).
    pub fn open_postgres(url: &str, password_file: Option<&Path>) -> Result<Store> {
        Self::connect_postgres(url, password_file, true)
    }

    /// [`Store::open_postgres`]; only reading (not `migrate`), a database
    /// that is not a ledger of this build's schema is refused, untouched.
    fn connect_postgres(url: &str, password_file: Option<&Path>, migrate: bool) -> Result<Store> {
        let session = super::pg::session::PgSession::connect(url, password_file, migrate)
            .map_err(|e| StoreError::Pg(e.to_string()))?;
        Ok(Self::from_db(Db::Pg(session), None))
    }

    /// Whether the ledger is PostgreSQL's.
    pub fn is_postgres(&self) -> bool {
        self.postgres
    }

    /// How far the database's clock is ahead of this machine's, in ms, and
    /// how long the reading that says so took; `None` for an embedded
    /// ledger, whose clock is this machine's. NTP's way: of
    /// [`CLOCK_READINGS`] readings of `agentcron_now_ms()`, each against the
    /// middle of its round trip, the one with the shortest round trip, whose
    /// error is at most half of it. One reading alone was as wrong as half a
    /// slow round trip: on a loaded machine two schedulers' clocks disagreed
    /// by tens of ms, and one's attempt seemed to start before the other's
    /// previous attempt of the same run had ended.
    pub fn database_offset_ms(&self) -> Result<Option<ClockReading>> {
        if !self.postgres {
            return Ok(None);
        }
        let mut readings = Vec::with_capacity(CLOCK_READINGS);
        for _ in 0..CLOCK_READINGS {
            let before = chrono::Utc::now().timestamp_millis();
            let db: i64 = self.read(|tx| {
                tx.one(super::exec::Sql::Text(super::pg::session::NOW_MS), &[], |r| {
                    r.get(0)
                })
            })?;
            readings.push((before, db, chrono::Utc::now().timestamp_millis()));
        }
        Ok(best_reading(&readings))
    }

    /// A private database in memory, for tests and rehearsals.
    pub fn open_in_memory() -> Result<Store> {
        configure_sqlite();
        let mut conn = Connection::open_in_memory()?;
        conn.execute_batch(MEMORY_PAGE_SIZE)?;
        conn.execute_batch("PRAGMA foreign_keys = ON;")?;
        schema::migrate(&mut conn, ":memory:")?;
        Ok(Self::from_conn(conn, None))
    }

    fn from_conn(conn: Connection, path: Option<PathBuf>) -> Store {
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Self::from_db(Db::Lite(Box::new(conn)), path)
    }

    fn from_db(db: Db, path: Option<PathBuf>) -> Store {
        Store {
            stmts: Statements::default(),
            postgres: matches!(db, Db::Pg(_)),
            conn: Mutex::new(db),
            path,
            counts: RunCounts::default(),
            commits: std::sync::atomic::AtomicU64::new(0),
            checkpointer: std::sync::OnceLock::new(),
            checkpoint_thread: Mutex::new(None),
            opened: None,
        }
    }

    /// Moves WAL checkpoints off the commit path, for a long-running
    /// scheduler: a thread with its own connection copies the WAL into the
    /// database (`PRAGMA wal_checkpoint(PASSIVE)`, which never blocks a writer)
    /// whenever a commit has left it larger than 16 MiB, once the commits
    /// pause for 20 ms (at most half a second later), so no claim waits for
    /// a checkpoint's page copies and fsync, nor shares the cores with them. The writer's own checkpoint stays
    /// as a backstop at 256 MiB. The thread ends with the store. A store in
    /// memory (an in-memory URI too: a rehearsal's shared database), or one
    /// opened read-only, has nothing to checkpoint: a no-op. Calling it again
    /// is a no-op too.
    pub fn checkpoint_in_background(&self) -> Result<()> {
        let Some(path) = self.path.clone().filter(|p| !is_memory_uri(p)) else {
            return Ok(());
        };
        if self.checkpointer.get().is_some() || self.with_conn(|c| c.is_readonly(rusqlite::MAIN_DB))? {
            return Ok(());
        }
        let conn = Connection::open(&path)?;
        conn.busy_timeout(busy_timeout())?;
        let mut wal = path.clone().into_os_string();
        wal.push("-wal");
        let wal = PathBuf::from(wal);
        let (nudge, nudged) = std::sync::mpsc::sync_channel::<()>(1);
        if self.checkpointer.set(nudge).is_err() {
            return Ok(());
        }
        self.with_conn(|c| c.pragma_update(None, "wal_autocheckpoint", BACKSTOP_AUTOCHECKPOINT_PAGES))?;
        let thread = std::thread::Builder::new()
            .name("agentcron-checkpoint".into())
            .spawn(move || {
                // Ends when the store (the sender) is gone.
                while nudged.recv().is_ok() {
                    let grown = std::fs::metadata(&wal).is_ok_and(|m| m.len() > CHECKPOINT_AT_BYTES);
                    if !grown {
                        continue;
                    }
                    // Not while the writer commits one claim chunk after
                    // another: on two cores the copy and its fsync would
                    // slow the tick's claims and its agents' starts. Once
                    // the commits pause, or at the latest after a while.
                    let since = std::time::Instant::now();
                    loop {
                        match nudged.recv_timeout(CHECKPOINT_QUIET) {
                            Ok(()) if since.elapsed() < CHECKPOINT_WAITS_AT_MOST => continue,
                            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    // A busy database or a reader holding old frames only
                    // delays it to the next nudge.
                    let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                }
            })
            .map_err(|e| StoreError::Invariant(format!("cannot start the checkpoint thread: {e}")))?;
        *self
            .checkpoint_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(())
    }

    /// Whether a background checkpointer runs for this store
    /// ([`Store::checkpoint_in_background`]).
    pub fn checkpoints_in_background(&self) -> bool {
        self.checkpointer.get().is_some()
    }

    /// After a commit: lets the background checkpointer look at the WAL.
    fn committed(&self) {
        if let Some(nudge) = self.checkpointer.get() {
            // Full = a look is already pending, which is enough.
            let _ = nudge.try_send(());
        }
    }

    /// The file, or `None` for an in-memory store.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Changes how long SQLite waits on a lock before `write` starts its own
    /// retries (default 5 s). Tests shorten it to reach `Locked` quickly.
    /// A PostgreSQL ledger keeps its own lock timeout: a no-op there.
    pub fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        if self.postgres {
            return Ok(());
        }
        self.with_conn(|c| c.busy_timeout(timeout))
    }

    /// Caps the ledger at its present size on this connection (SQLite's
    /// `max_page_count`; `false` lifts the cap): a write that needs another
    /// page then fails as on a full disk (SQLITE_FULL). Tests fill a disk so.
    pub fn cap_at_present_size(&self, cap: bool) -> Result<()> {
        self.with_conn(|c| {
            let pages: i64 = if cap {
                c.query_row("PRAGMA page_count", [], |r| r.get(0))?
            } else {
                // SQLite's default cap.
                4_294_967_294
            };
            c.query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
        })
    }

    /// `f` on the SQLite connection: this thread's batch's, inside one
    /// (whose guard it holds: locking again would wait for ever), else
    /// locked for `f`. A PostgreSQL ledger has none: an error saying so.
    fn with_conn<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        let run = |db: &Db| match db {
            Db::Lite(conn) => Ok(f(conn)?),
            Db::Pg(_) => Err(StoreError::Invariant(
                "an SQLite connection setting asked of a PostgreSQL ledger".into(),
            )),
        };
        match self.batch_conn() {
            // SAFETY: as in `write`: the batch on this thread holds the guard.
            Some((db, _)) => run(unsafe { &*db }),
            None => run(&self.lock()),
        }
    }

    /// The connection to run statements on: SQLite's (with this store's
    /// kept statements), or the PostgreSQL session.
    fn on<'s>(&'s self, db: &'s Db) -> super::exec::Conn<'s> {
        match db {
            Db::Lite(conn) => super::exec::Conn::Lite {
                conn,
                stmts: &self.stmts,
            },
            Db::Pg(pg) => super::exec::Conn::Pg(pg),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Db> {
        // A panic inside `write`/`read` unwound through the transaction guard,
        // which rolled back; the connection itself is still sound.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` with every [`Store::write`] and [`Store::read`] it makes (on
    /// this thread, on this store) inside ONE `BEGIN IMMEDIATE` transaction,
    /// which commits at the end (or rolls back if `f` fails). A write inside
    /// the batch is no savepoint of its own (savepoints were a fifth of a
    /// lifecycle's time): a write that fails fails the batch, and the one
    /// writer that may find a conflict ([`Tx::apply`]) decides it with its
    /// first statement, before it has written anything.
    ///
    /// Why: every SQLite commit rewrites each page it touched; a tick that opens
    /// or finishes hundreds of runs in one commit writes those pages once. Other
    /// threads using this store wait for the batch; other processes wait on the
    /// database lock as for any write. Keep IO that may block (gates, agents)
    /// out of a batch.
    pub fn batch<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.batch_in(None, f)
    }

    /// [`Store::batch`] with the engine's model (`None`: one of its own,
    /// for this transaction alone).
    pub(crate) fn batch_in<T, E: From<StoreError>>(
        &self,
        model: Option<&Model>,
        f: impl FnOnce() -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        let me: *const Store = self;
        if BATCH.with(|b| b.get().is_some_and(|(s, _, _)| s == me)) {
            return f(); // already inside this store's batch
        }
        let guard = self.lock();
        let open = Open::begin(self.on(&guard), true)?;
        let transient = Model::default();
        let m = self.model_for(self.on(&guard), model, &transient)?;
        let db: *const Db = &*guard;
        BATCH.with(|b| b.set(Some((me, db, m))));
        // Cleared on every way out of `f`, panics included, before the guard goes.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                BATCH.with(|b| b.set(None));
            }
        }
        let clear = Clear;
        let forget = ForgetOnPanic(self, m);
        let mut out = f();
        drop(forget);
        drop(clear);
        if out.is_ok()
            && let Err(e) = self
                .counts
                .flush(self.on(&guard))
                .and_then(|()| flush_fencing(self.on(&guard), m))
        {
            out = Err(E::from(self.classify(e)));
        }
        self.counts.clear();
        if out.is_err() {
            m.clear();
            drop(open); // rolls back
            return out;
        }
        match open.commit(self, model) {
            Ok(()) => {
                self.committed();
                out
            }
            Err(e) => {
                m.clear();
                Err(E::from(if busy(&e) {
                    StoreError::Locked { waited_ms: 0 }
                } else {
                    self.classify(e)
                }))
            }
        }
    }

    /// The model a transaction that just began runs with: the engine's
    /// (`model`), told first whether anything else wrote since its last
    /// look, or `transient`, one for this transaction alone.
    fn model_for<'m>(
        &self,
        conn: super::exec::Conn<'_>,
        model: Option<&'m Model>,
        transient: &'m Model,
    ) -> Result<&'m Model> {
        let Some(m) = model else {
            return Ok(transient);
        };
        m.validate(
            data_version(conn)?,
            self.commits.load(std::sync::atomic::Ordering::Relaxed),
        );
        Ok(m)
    }

    /// The connection of this thread's open batch on this store, if any.
    fn batch_conn(&self) -> Option<(*const Db, *const Model)> {
        let me: *const Store = self;
        BATCH.with(|b| b.get().filter(|(s, _, _)| *s == me).map(|(_, c, m)| (c, m)))
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction; commits on `Ok`, rolls back
    /// on `Err`. When another process holds the write lock beyond busy_timeout,
    /// the BEGIN is retried a few times with growing backoff, then
    /// [`StoreError::Locked`]. Inside a [`Store::batch`] it joins the batch's
    /// transaction (an error fails the batch).
    pub fn write<T>(&self, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        self.write_in(None, f)
    }

    /// [`Store::write`] with the engine's model (`None`: one of its own,
    /// for this transaction alone). Inside a batch, the batch's.
    pub(crate) fn write_in<T>(&self, model: Option<&Model>, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        if let Some((conn, m)) = self.batch_conn() {
            // SAFETY: the pointers are set by `batch` on this thread while it
            // holds the connection's mutex guard (and borrows the model) for
            // the whole call of its closure, and cleared before the guard is
            // dropped; we are inside that closure.
            let (conn, m) = unsafe { (&*conn, &*m) };
            forget_if_other(model, m);
            return f(&Tx {
                on: self.on(conn),
                counts: &self.counts,
                model: m,
            })
            .map_err(|e| self.classify(e));
        }
        let conn = self.lock();
        let started = Instant::now();
        let locked = |started: Instant| StoreError::Locked {
            waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        };
        let open = Open::begin(self.on(&conn), true)?;
        let tx: &Db = &conn;
        let transient = Model::default();
        let m = self.model_for(self.on(tx), model, &transient)?;
        let forget = ForgetOnPanic(self, m);
        let out = f(&Tx {
            on: self.on(tx),
            counts: &self.counts,
            model: m,
        })
        .and_then(|v| self.counts.flush(self.on(tx)).map(|()| v))
        .and_then(|v| flush_fencing(self.on(tx), m).map(|()| v));
        drop(forget);
        self.counts.clear();
        if out.is_err() {
            m.clear();
        }
        match out {
            Ok(v) => match open.commit(self, model) {
                Ok(()) => {
                    self.committed();
                    Ok(v)
                }
                Err(e) => {
                    m.clear();
                    Err(if busy(&e) {
                        locked(started)
                    } else {
                        self.classify(e)
                    })
                }
            },
            // Dropping `open` rolls back.
            Err(StoreError::Sqlite(e)) if is_busy(&e) => Err(locked(started)),
            Err(e) => Err(self.classify(e)),
        }
    }

    /// Runs `f` on one consistent read snapshot (a deferred transaction).
    /// Writes belong in [`Store::write`]; a read-only store refuses them.
    pub fn read<T>(&self, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        self.read_in(None, f)
    }

    /// [`Store::read`] with the engine's model (`None`: one of its own).
    pub(crate) fn read_in<T>(&self, model: Option<&Model>, f: impl FnOnce(&Tx) -> Result<T>) -> Result<T> {
        if let Some((conn, m)) = self.batch_conn() {
            // SAFETY: as in `write_in`: the batch on this thread holds both.
            let (conn, m) = unsafe { (&*conn, &*m) };
            forget_if_other(model, m);
            return f(&Tx {
                on: self.on(conn),
                counts: &self.counts,
                model: m,
            })
            .map_err(|e| self.classify(e));
        }
        let conn = self.lock();
        let started = Instant::now();
        let open = Open::begin(self.on(&conn), false)?;
        let tx: &Db = &conn;
        let transient = Model::default();
        let m = self.model_for(self.on(tx), model, &transient).map_err(|e| {
            if busy(&e) {
                StoreError::Locked {
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                }
            } else {
                e
            }
        })?;
        match f(&Tx {
            on: self.on(tx),
            counts: &self.counts,
            model: m,
        }) {
            Ok(v) => {
                open.commit(self, model)?;
                Ok(v)
            }
            Err(StoreError::Sqlite(e)) if is_busy(&e) => Err(StoreError::Locked {
                waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            }),
            Err(e) => Err(self.classify(e)),
        }
    }
}

impl<'a> Tx<'a> {
    /// The connection this transaction runs on.
    pub(crate) fn conn(&self) -> super::exec::Conn<'a> {
        self.on
    }
}

impl Tx<'_> {
    /// `EXPLAIN QUERY PLAN` of each hot query (due_runs, expired_leases, …), by
    /// name: a diagnostic that shows which index each one uses.
    /// SQLite's plans only: a PostgreSQL ledger answers an error.
    pub fn hot_query_plans(&self) -> Result<Vec<(&'static str, Vec<String>)>> {
        let super::exec::Conn::Lite { conn, .. } = self.on else {
            return Err(StoreError::Invariant(
                "query plans are SQLite's; ask PostgreSQL with EXPLAIN".into(),
            ));
        };
        let mut queries: Vec<(&'static str, String)> = super::runs::HOT_QUERIES
            .iter()
            .chain(super::attempts::HOT_QUERIES)
            .chain(super::engine_queries::HOT_QUERIES)
            .map(|(name, sql)| (*name, (*sql).to_string()))
            .collect();
        queries.extend(super::events::hot_queries());
        queries
            .into_iter()
            .map(|(name, sql)| Ok((name, schema::query_plan(conn, &sql)?)))
            .collect()
    }
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    #[test]
    fn the_reading_with_the_shortest_round_trip_is_the_one_kept() {
        // (before, database, after): a slow round trip whose middle is far
        // from the instant the database read its clock, then a quick one.
        let readings = [
            (1_000, 1_010, 1_200),
            (2_000, 2_013, 2_004),
            (3_000, 3_040, 3_100),
        ];
        assert_eq!(
            best_reading(&readings),
            Some(ClockReading {
                offset_ms: 11,
                round_trip_ms: 4
            })
        );
        assert_eq!(best_reading(&[]), None);
    }
}
