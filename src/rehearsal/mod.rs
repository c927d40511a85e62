//! Failure rehearsals: the real engine and store driven on a virtual clock with
//! simulated agents and gates (DESIGN.md "Rehearsals").

pub mod driver;
pub mod run;
pub mod scenario;
pub mod sim;
pub mod sim_gate;

pub use run::{Rehearsal, Report, Verdict};

/// The exit code of a rehearsal as far as it got: 0 when every expectation
/// holds, 1 when any is broken or still pending (as `rehearse FILE` decides,
/// [`Report::from_verdicts`]), 1 when the scenario never got going (`None`:
/// it could not be loaded or run). `rehearse FILE --console` exits with it
/// on what the console had seen when the operator quit.
pub fn exit_code(verdicts: Option<&[Verdict]>) -> i32 {
    match verdicts {
        Some(v) if Report::from_verdicts("", v).passed => 0,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(passed: Option<bool>) -> Verdict {
        Verdict {
            text: "x".into(),
            passed,
            detail: String::new(),
        }
    }

    #[test]
    fn only_every_expectation_held_is_exit_0() {
        assert_eq!(exit_code(Some(&[])), 0);
        assert_eq!(exit_code(Some(&[verdict(Some(true))])), 0);
        assert_eq!(exit_code(Some(&[verdict(Some(true)), verdict(None)])), 1);
        assert_eq!(exit_code(Some(&[verdict(Some(false))])), 1);
        assert_eq!(exit_code(None), 1);
    }
}
