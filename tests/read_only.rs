//! Databases agentcron may only read, and databases that are not agentcron's
//! (issue 14): the read verbs work on a `0444` file in a `0555` folder, as a
//! user who cannot write either (tests run as root drop to `nobody`, for whom
//! the mode bits hold); a foreign SQLite file is refused, byte for byte
//! untouched, by reads and writes alike.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_agentcron"))
}

/// `nobody` when we are root (root ignores mode bits), else ourselves.
fn as_reader(cmd: &mut Command) -> &mut Command {
    // SAFETY: geteuid(2) reads our id; it cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A database with one run of `job`, closed (no -wal or -shm left), in `dir`.
fn made_database(dir: &Path) -> PathBuf {
    std::fs::write(
        dir.join("agentcron.toml"),
        r#"
[scheduler]
database = "test.db"

[agents.a]
kind = "command"
command = ["true"]

[[schedule]]
id = "job"
agent = "a"
on_event = "go"
"#,
    )
    .unwrap();
    // Made as a scheduler makes it (a verb never creates a ledger), then closed.
    drop(agentcron::store::Store::open(&dir.join("test.db")).unwrap());
    let out = Command::new(bin())
        .args(["trigger", "job", "--window", "w1", "--config"])
        .arg(dir.join("agentcron.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let db = dir.join("test.db");
    assert!(db.exists());
    assert!(!dir.join("test.db-wal").exists() && !dir.join("test.db-shm").exists());
    db
}

fn lock_down(dir: &Path, db: &Path) {
    std::fs::set_permissions(db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
}

/// Gives the folder back its write bit so the temp dir can be removed.
struct Unlock(PathBuf);

impl Drop for Unlock {
    fn drop(&mut self) {
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn read_verbs_work_on_a_database_nobody_may_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = made_database(dir.path());
    lock_down(dir.path(), &db);
    let _unlock = Unlock(dir.path().to_path_buf());
    for args in [
        vec!["runs"],
        vec!["runs", "--json"],
        vec!["show", "1", "--json"],
        vec!["events", "--json"],
        vec!["explain", "job", "--window", "w1"],
    ] {
        let out = as_reader(Command::new(bin()).args(&args).arg("--db").arg(&db))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("w1") || said.contains("job"), "{args:?}: {said}");
    }
    // Nothing was created beside it (the folder is not writable anyway).
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with("-wal") || n.ends_with("-shm")),
        "{names:?}"
    );
}

/// Another program's SQLite file: a table, no agentcron schema, rollback journal.
fn foreign(dir: &Path) -> PathBuf {
    let path = dir.join("other.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine');",
    )
    .unwrap();
    drop(conn);
    path
}

#[test]
fn a_foreign_database_is_refused_and_left_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let path = foreign(dir.path());
    let before = std::fs::read(&path).unwrap();
    for args in [
        vec!["runs"],
        vec!["events", "--json"],
        vec!["trigger", "job"],
        vec!["kill", "--reason", "test"],
        vec!["run", "--headless"],
    ] {
        let out = Command::new(bin())
            .args(&args)
            .arg("--db")
            .arg(&path)
            .arg("--config")
            .arg(dir.path().join("none.toml"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted a foreign database");
        assert!(
            std::fs::read(&path).unwrap() == before,
            "{args:?} changed the file: {}",
            text(&out)
        );
        assert!(!dir.path().join("other.db-wal").exists(), "{args:?} left a WAL");
    }
    // Opened for writing by the library too: refused before anything is written.
    let err = agentcron::store::Store::open(&path).unwrap_err();
    assert!(err.to_string().contains("not an agentcron database"), "{err}");
    assert!(std::fs::read(&path).unwrap() == before);
}
