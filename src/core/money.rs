//! Money as people and programs read it. Costs are reported by agents as
//! floating-point dollars and summed by the ledger, so they carry binary noise
//! (`0.0050999999999999999`); everything that shows one goes through here.

/// Decimals kept: a millionth of a dollar, below any price per token.
const DECIMALS: i32 = 6;

/// `x` rounded to [`DECIMALS`] places: what JSON carries (still a number).
pub fn usd(x: f64) -> f64 {
    let scale = 10f64.powi(DECIMALS);
    let rounded = (x * scale).round() / scale;
    // -0.0 reads oddly; NaN / infinities are not costs anyone reported.
    if rounded == 0.0 || !rounded.is_finite() {
        0.0
    } else {
        rounded
    }
}

/// Decimals shown to people: a hundredth of a cent, at every size, so a
/// column of costs lines up.
const SHOWN: usize = 4;

/// `$0.0051`, `$1.5000`: fixed at [`SHOWN`] decimals.
pub fn usd_text(x: f64) -> String {
    format!("${:.*}", SHOWN, usd(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_with_binary_noise_read_as_the_cents_they_are() {
        let noisy = 0.0017 + 0.0017 + 0.0017;
        assert_eq!(usd(noisy), 0.0051);
        assert_eq!(usd(0.005_099_999_999_999_999_9), 0.0051);
        assert_eq!(serde_json::json!(usd(noisy)).to_string(), "0.0051");
        assert_eq!(usd_text(noisy), "$0.0051");
        assert_eq!(usd_text(0.005_099_999_999_999_999_9), "$0.0051");
        assert_eq!(usd_text(1.5), "$1.5000");
        assert_eq!(usd_text(0.0), "$0.0000");
        assert_eq!(usd_text(12.345_678_9), "$12.3457");
        assert_eq!(usd_text(-0.000_000_1), "$0.0000");
        assert_eq!(usd(12.345_678_9), 12.345_679);
    }
}
