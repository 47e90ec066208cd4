//! Resource quantities (`1`, `500m`, `2Gi`, `1e3`) as `resource.ParseQuantity` reads them,
//! with its error texts. Only what validation needs: the sign and the magnitude.

/// Kubernetes' `ErrFormatWrong` text.
pub const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const SUFFIX_WRONG: &str = "unable to parse quantity's suffix";
const NUMERIC_WRONG: &str = "unable to parse numeric part of quantity";

/// The value of a quantity string, or Kubernetes' parse error.
pub fn parse(text: &str) -> Result<f64, &'static str> {
    let s = text.trim().as_bytes();
    if s.is_empty() {
        return Err(FORMAT_WRONG);
    }
    let mut pos = 0;
    if matches!(s[0], b'+' | b'-') {
        pos += 1;
    }
    while pos < s.len() && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < s.len() && s[pos] == b'.' {
        pos += 1;
        while pos < s.len() && s[pos].is_ascii_digit() {
            pos += 1;
        }
    }
    let number = &text.trim()[..pos];
    let suffix_start = pos;
    while pos < s.len() && b"eEinumkKMGTP".contains(&s[pos]) {
        pos += 1;
    }
    if pos < s.len() && matches!(s[pos], b'+' | b'-') {
        pos += 1;
    }
    while pos < s.len() && s[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos != s.len() {
        return Err(FORMAT_WRONG);
    }
    let multiplier = suffix_multiplier(&text.trim()[suffix_start..]).ok_or(SUFFIX_WRONG)?;
    let digits = number.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." {
        return Err(NUMERIC_WRONG);
    }
    let value: f64 = number.parse().map_err(|_| NUMERIC_WRONG)?;
    Ok(value * multiplier)
}

fn suffix_multiplier(suffix: &str) -> Option<f64> {
    let binary = |power: i32| Some(1024f64.powi(power));
    let decimal = |exponent: i32| Some(10f64.powi(exponent));
    match suffix {
        "" => decimal(0),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        _ if suffix.len() > 1 && suffix.starts_with(['e', 'E']) => {
            decimal(suffix[1..].parse::<i32>().ok()?)
        }
        _ => None,
    }
}

/// Whether the quantity counts whole units (its milli-value, rounded up, is a multiple of 1000).
pub fn is_whole(value: f64) -> bool {
    let milli = (value * 1000.0 - 1e-6).ceil();
    milli % 1000.0 == 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_kubernetes() {
        let cases: &[(&str, Result<f64, &str>)] = &[
            ("1", Ok(1.0)),
            ("0", Ok(0.0)),
            ("500m", Ok(0.5)),
            ("2Gi", Ok(2.0 * 1024.0 * 1024.0 * 1024.0)),
            ("1.5k", Ok(1500.0)),
            ("1e3", Ok(1000.0)),
            ("-1", Ok(-1.0)),
            ("+4", Ok(4.0)),
            ("1E", Ok(1e18)),
            ("", Err(FORMAT_WRONG)),
            ("abc", Err(FORMAT_WRONG)),
            ("1.2.3", Err(FORMAT_WRONG)),
            ("1 Gi", Err(FORMAT_WRONG)),
            ("1Gb", Err(FORMAT_WRONG)),
            ("1K", Err(SUFFIX_WRONG)),
            ("1e", Err(SUFFIX_WRONG)),
            ("1iK", Err(SUFFIX_WRONG)),
            ("Ki", Err(NUMERIC_WRONG)),
            (".", Err(NUMERIC_WRONG)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), *expected, "{text}");
        }
    }

    #[test]
    fn whole_numbers() {
        assert!(is_whole(3.0));
        assert!(is_whole(1024.0));
        assert!(!is_whole(1.5));
        assert!(!is_whole(0.001));
        assert!(is_whole(0.1 * 10.0));
    }
}
