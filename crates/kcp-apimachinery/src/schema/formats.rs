//! The string `format`s Kubernetes checks on custom resources (the rest are accepted as is).

/// Why `text` is not a valid `format`, or `None` when it is (or the format is not checked).
pub(super) fn check(format: &str, text: &str) -> Option<String> {
    let valid = match format {
        "int32" | "int64" => text.parse::<i64>().is_ok(),
        "byte" => is_base64(text),
        "date" => is_date(text),
        "date-time" | "datetime" => is_date_time(text),
        "uuid" => is_uuid(text),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "hostname" => is_hostname(text),
        _ => true,
    };
    (!valid).then(|| format!("{text:?}"))
}

fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    let data = bytes.iter().position(|b| *b == b'=').unwrap_or(bytes.len());
    bytes.len().is_multiple_of(4)
        && bytes.len() - data <= 2
        && bytes[..data]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        && bytes[data..].iter().all(|b| *b == b'=')
}

fn digits(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| b.is_ascii_digit())
}

fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    matches!(parts.as_slice(), [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2)
        && (1..=12).contains(&m.parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&d.parse::<u8>().unwrap_or(0)))
}

fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    let zone_at = time
        .rfind(['Z', 'z', '+', '-'])
        .filter(|at| *at >= 8)
        .unwrap_or(time.len());
    let (clock, zone) = time.split_at(zone_at);
    let clock = clock.split('.').next().unwrap_or_default();
    let parts: Vec<&str> = clock.split(':').collect();
    is_date(date)
        && matches!(parts.as_slice(), [h, m, s] if digits(h, 2) && digits(m, 2) && digits(s, 2))
        && (zone.eq_ignore_ascii_case("z") || (zone.len() == 6 && zone.as_bytes()[3] == b':'))
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn is_cidr(text: &str) -> bool {
    let Some((address, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => bits <= 32,
        Ok(std::net::IpAddr::V6(_)) => bits <= 128,
        Err(_) => false,
    }
}

fn is_hostname(text: &str) -> bool {
    text.len() <= 253
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn formats_accept_and_refuse() {
        for (format, good, bad) in [
            ("int32", "42", "4x"),
            ("byte", "aGk=", "a-b_"),
            ("date", "2026-11-22", "2026-13-01"),
            ("date-time", "2026-11-22T07:30:00Z", "2026-11-22 07:30"),
            ("date-time", "2026-11-22T07:30:00.5+01:00", "yesterday"),
            ("uuid", "6a2f41a3-c54c-fce8-32d2-0324e1c32e22", "6a2f41a3"),
            ("ipv4", "10.0.0.1", "10.0.0.256"),
            ("cidr", "10.0.0.0/8", "10.0.0.0/33"),
            ("hostname", "a.example.com", "-a.example"),
        ] {
            assert_eq!(check(format, good), None, "{format} {good}");
            assert!(check(format, bad).is_some(), "{format} {bad}");
        }
        assert_eq!(check("password", "anything"), None);
    }
}
