//! `agentcron db copy --from FILE.db --to postgres://…`: an embedded ledger
//! moved into an empty PostgreSQL one (see `store::pg::copy`). Refuses a
//! target that already holds ledger rows; `--dry-run` prints what it would
//! copy and contacts no server.

use super::exit;
use crate::store::pg::{self, PgStore, copy};
use std::path::Path;

pub fn run(from: &Path, to: &str, password_file: Option<&Path>, dry_run: bool) -> i32 {
    if !pg::is_url(to) {
        eprintln!("agentcron: --to must be a PostgreSQL URL (postgres://USER@HOST[:PORT]/DATABASE)");
        return exit::USAGE;
    }
    if !from.exists() {
        eprintln!("agentcron: no database at {}", from.display());
        return exit::USAGE;
    }
    let shown = pg::shown_url(to);
    // The source is checked first: a file that cannot be copied is refused
    // before the target is touched (not even migrated).
    let counts = match copy::source_counts(from) {
        Ok(counts) => counts,
        Err(e) => {
            eprintln!("agentcron: {e}; nothing was copied");
            return exit::USAGE;
        }
    };
    if dry_run {
        print_counts("would copy", &counts);
        println!("dry run: nothing written to {shown}");
        return exit::OK;
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentcron: cannot start the runtime: {e}");
            return exit::DOES_NOT_HOLD;
        }
    };
    let copied = rt.block_on(async {
        let store = PgStore::connect(to, password_file).await?;
        copy::copy(from, &store).await
    });
    match copied {
        Ok(counts) => {
            print_counts("copied", &counts);
            println!("copied {} into {shown}", from.display());
            exit::OK
        }
        Err(e) => {
            eprintln!("agentcron: {e}; nothing was copied");
            exit::USAGE
        }
    }
}

fn print_counts(verb: &str, counts: &copy::Counts) {
    for (table, n) in counts {
        println!("{verb} {n:>9} {table}");
    }
}
