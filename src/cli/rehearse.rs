//! `agentcron rehearse FILE... [--json]`: run failure rehearsals headless and
//! print the timeline and a verdict per expectation.

use super::exit;
use crate::rehearsal::{Rehearsal, Report, scenario};
use std::path::PathBuf;

pub fn run(files: &[PathBuf], json: bool, quiet: bool, db: Option<&std::path::Path>) -> i32 {
    if db.is_some() && files.len() > 1 {
        eprintln!("agentcron rehearse: --db keeps one rehearsal's database; give one file");
        return exit::USAGE;
    }
    let mut worst = exit::OK;
    for file in files {
        let sc = match scenario::load(file) {
            Ok(s) => s,
            Err(e) => {
                super::check::report_load_error(file, &e);
                worst = exit::USAGE;
                continue;
            }
        };
        let mut sc = sc;
        if let Some(db) = db {
            if db.exists() {
                eprintln!(
                    "agentcron rehearse: {} exists; --db writes a new database",
                    db.display()
                );
                return exit::USAGE;
            }
            sc.keep_db = Some(db.to_path_buf());
        }
        let name = sc.name.clone();
        let tz = sc.config.scheduler.timezone;
        let mut r = match Rehearsal::new(sc) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("agentcron rehearse: {}: {e}", file.display());
                worst = exit::USAGE;
                continue;
            }
        };
        if let Err(e) = r.run_to_end() {
            eprintln!("agentcron rehearse: {}: {e}", file.display());
            worst = exit::USAGE;
            continue;
        }
        let verdicts = match r.verdicts() {
            Ok(v) => v,
            Err(e) => {
                eprintln!("agentcron rehearse: {}: {e}", file.display());
                worst = exit::USAGE;
                continue;
            }
        };
        let report = Report::from_verdicts(&name, &verdicts);
        if !report.passed && worst == exit::OK {
            worst = exit::DOES_NOT_HOLD;
        }
        if json {
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            continue;
        }
        println!("== {name} ({})", file.display());
        if !quiet {
            match r.timeline() {
                Ok(lines) => {
                    for l in lines {
                        let at = l.at.with_timezone(&tz).format("%m-%d %H:%M:%S");
                        let who = match (&l.schedule, &l.window) {
                            (Some(s), Some(w)) => format!("{s} {w}"),
                            (Some(s), None) => s.clone(),
                            _ => String::new(),
                        };
                        // One zone: the instants inside the texts too.
                        let text = crate::time::in_zone(&l.text, tz);
                        println!("  {at}  {:<16} {:<40} {text}", l.kind, who);
                    }
                }
                Err(e) => eprintln!("agentcron rehearse: timeline: {e}"),
            }
        }
        println!("Expectations:");
        for e in &report.expectations {
            let mark = if e.passed { "✓ pass" } else { "✗ FAIL" };
            println!(
                "  {mark}  {}  — {}",
                crate::time::in_zone(&e.text, tz),
                crate::time::in_zone(&e.detail, tz)
            );
        }
        let ok = report.expectations.iter().filter(|e| e.passed).count();
        println!(
            "{}: {ok}/{} expectations hold\n",
            if report.passed { "PASSED" } else { "BROKEN" },
            report.expectations.len()
        );
    }
    worst
}
