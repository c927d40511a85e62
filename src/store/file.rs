//! The ledger file itself: which file a store opened (its device and inode),
//! so that a scheduler notices when the file is deleted or replaced under it,
//! and whether an error met while writing means the disk is full.

use super::{LedgerFile, Result, Store, StoreError};
use rusqlite::ErrorCode;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Below this much space left for unprivileged writers, an I/O error while
/// writing is taken for a full disk (SQLite reports ENOSPC on a write as
/// SQLITE_FULL, but as SQLITE_IOERR when it happens while growing the WAL
/// index or syncing).
const FULL_BELOW_BYTES: u64 = 1 << 20;

/// A file's identity: the device and inode it has. Another file put at the
/// same path (a restored backup, `mv new.db ledger.db`) has another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The identity of the file at `path` now; `None` when there is none.
    pub(crate) fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Whether the file at `path` is still `opened`: `Err` names what became of it.
pub(crate) fn still_there(path: &Path, opened: FileId) -> std::result::Result<(), LedgerFile> {
    let shown = path.display().to_string();
    match FileId::of(path) {
        Some(now) if now == opened => Ok(()),
        Some(_) => Err(LedgerFile::Replaced { path: shown }),
        None => Err(LedgerFile::Missing { path: shown }),
    }
}

/// `e` as [`StoreError::DiskFull`] when it says the disk holding `path` is
/// full; otherwise `e` unchanged.
pub(crate) fn classify(path: Option<&Path>, e: StoreError) -> StoreError {
    let StoreError::Sqlite(inner) = e else {
        return e;
    };
    let full = match inner.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => true,
        Some(ErrorCode::SystemIoFailure) => path.is_some_and(no_space_left),
        _ => false,
    };
    if !full {
        return StoreError::Sqlite(inner);
    }
    StoreError::DiskFull {
        path: path.map_or_else(|| "in memory".to_string(), |p| p.display().to_string()),
        message: inner.to_string(),
    }
}

/// Whether the file system holding `path` has (almost) no space left for an
/// unprivileged writer.
fn no_space_left(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(folder.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs(3) with a valid NUL-terminated path and a zeroed
    // struct it fills in; the struct is only read when it returns 0.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) < FULL_BELOW_BYTES
}

impl Store {
    /// Whether the ledger's path still names the file this store opened (a
    /// `stat`, cheap enough for every tick). A file deleted, moved away or
    /// replaced under a running process is [`StoreError::FileChanged`]:
    /// whatever it writes from then on reaches a file nobody else reads. A
    /// PostgreSQL ledger, or one in memory, has no file: always `Ok`.
    pub fn check_file(&self) -> Result<()> {
        match (self.path(), self.file_id()) {
            (Some(path), Some(opened)) => still_there(path, opened).map_err(StoreError::FileChanged),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_deleted_or_replaced_under_its_store_is_named_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        std::fs::write(&path, "a").unwrap();
        let id = FileId::of(&path).unwrap();
        assert_eq!(still_there(&path, id), Ok(()));
        // A rename away and back keeps the inode: the same file.
        let aside = dir.path().join("aside.db");
        std::fs::rename(&path, &aside).unwrap();
        assert!(matches!(still_there(&path, id), Err(LedgerFile::Missing { .. })));
        std::fs::write(&path, "b").unwrap();
        assert!(matches!(still_there(&path, id), Err(LedgerFile::Replaced { .. })));
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&aside, &path).unwrap();
        assert_eq!(still_there(&path, id), Ok(()));
    }

    #[test]
    fn sqlite_full_is_a_full_disk_and_other_errors_stay_what_they_are() {
        let full = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            Some("database or disk is full".into()),
        );
        let e = classify(Some(Path::new("/tmp/x.db")), StoreError::Sqlite(full));
        assert!(matches!(e, StoreError::DiskFull { .. }), "{e:?}");
        assert!(e.is_transient());
        let constraint =
            rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT), None);
        let e = classify(Some(Path::new("/tmp/x.db")), StoreError::Sqlite(constraint));
        assert!(matches!(e, StoreError::Sqlite(_)), "{e:?}");
        assert!(!e.is_transient());
    }
}
