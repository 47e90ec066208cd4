//! Durations as Kubernetes' command-line flags spell them (Go's `time.ParseDuration`, without
//! fractions or signs).

use std::time::Duration;

/// Parses a duration as kube-apiserver's flags spell them: `300s`, `5m`, `1h30m`, `500ms`, `0`.
pub fn parse(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| format!("missing unit in duration {text:?}"))?;
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => return Err(format!("unknown unit {other:?} in duration {text:?}")),
        };
        let too_long = || format!("duration {text:?} too long");
        let part = unit
            .checked_mul(u32::try_from(value).map_err(|_| too_long())?)
            .ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
        rest = &rest[unit_end..];
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_durations_are_errors_not_panics() {
        // Each part fits; their sum does not fit a Duration.
        let many = format!("{}h", u32::MAX).repeat(1_200_000);
        assert!(parse(&many).is_err());
        assert!(parse(&format!("{}h", u64::MAX)).is_err());
    }

    #[test]
    fn durations_read_like_kube_flags() {
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert!(parse("5").is_err());
        assert!(parse("5y").is_err());
    }
}
