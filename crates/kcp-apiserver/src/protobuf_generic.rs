//! Protobuf messages of any built-in kind read into their JSON form, driven by Kubernetes' own
//! message definitions (`kcp_apis::messages`): field tags, JSON names, labels and types.
//!
//! The JSON form is what Go's decoding then encoding gives: empty strings, lists, maps and
//! messages are left out (Kubernetes' fields are `omitempty` nearly everywhere, and the
//! registry treats absent and empty alike), and the types whose JSON differs from their
//! messages are converted: `Time`/`MicroTime` (RFC 3339), `Duration`, `Quantity`,
//! `IntOrString`, `RawExtension`/`JSON`/`FieldsV1` (their JSON bytes), the
//! `JSONSchemaPropsOr*` unions and `ExtraValue` (a list). Field names are JSON's, as
//! `kcp_apis::messages` keeps them.

use base64::Engine;
use kcp_apis::messages::{EXTENSIONS, META};
use serde_json::{Map, Value, json};

/// The Unix seconds of Go's zero time, which Kubernetes writes for an unset `Time`.
const GO_ZERO_TIME: i64 = -62_135_596_800;
/// Messages nest at most this deep (JSONSchemaProps recurse).
const MAX_NESTING: usize = kcp_apimachinery::json::MAX_DEPTH;

/// Decodes `bytes` as the message `name` into its JSON form.
pub fn decode(name: &str, bytes: &[u8]) -> Result<Value, String> {
    decode_message(name, bytes, 0)
}

fn decode_message(name: &str, bytes: &[u8], nesting: usize) -> Result<Value, String> {
    if nesting > MAX_NESTING {
        return Err("protobuf messages nest too deep".into());
    }
    let fields = kcp_apis::messages::fields(name)
        .ok_or_else(|| format!("no protobuf definition of {name}"))?;
    let mut out = Map::new();
    let mut reader = Reader { bytes, at: 0 };
    while !reader.done() {
        let key = reader.varint()?;
        let (tag, wire) = ((key >> 3) as u32, (key & 7) as u8);
        let Some((_, json_name, label, kind)) = fields.iter().find(|f| f.0 == tag) else {
            reader.skip(wire)?;
            continue;
        };
        match label.as_str() {
            "map" => {
                let entry = reader.length_delimited(wire)?;
                let (key, value) = map_entry(kind, entry, nesting)?;
                let map = out
                    .entry(json_name.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(map) = map {
                    map.insert(key, value);
                }
            }
            "repeated" => {
                let list = out
                    .entry(json_name.clone())
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(list) = list else { continue };
                if wire == 2 && is_packable(kind) {
                    let mut packed = Reader {
                        bytes: reader.length_delimited(wire)?,
                        at: 0,
                    };
                    while !packed.done() {
                        list.push(scalar(kind, &mut packed, packed_wire(kind))?);
                    }
                } else {
                    list.push(value(kind, &mut reader, wire, nesting)?);
                }
            }
            _ => {
                let decoded = value(kind, &mut reader, wire, nesting)?;
                out.insert(json_name.clone(), decoded);
            }
        }
    }
    out.retain(|_, v| !is_empty(v));
    Ok(special(name, out))
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn is_packable(kind: &str) -> bool {
    matches!(
        kind,
        "bool"
            | "int32"
            | "int64"
            | "uint32"
            | "uint64"
            | "sint32"
            | "sint64"
            | "double"
            | "float"
            | "fixed32"
            | "fixed64"
    )
}

fn packed_wire(kind: &str) -> u8 {
    match kind {
        "double" | "fixed64" => 1,
        "float" | "fixed32" => 5,
        _ => 0,
    }
}

/// A map entry: key (field 1, a string) and value (field 2, of `kind`).
fn map_entry(kind: &str, bytes: &[u8], nesting: usize) -> Result<(String, Value), String> {
    let mut reader = Reader { bytes, at: 0 };
    let (mut key, mut found) = (String::new(), Value::Null);
    while !reader.done() {
        let tag = reader.varint()?;
        match (tag >> 3, (tag & 7) as u8) {
            (1, 2) => key = utf8(reader.length_delimited(2)?)?,
            (2, wire) => found = value(kind, &mut reader, wire, nesting)?,
            (_, wire) => reader.skip(wire)?,
        }
    }
    if found.is_null() {
        found = match kind {
            "string" | "bytes" => json!(""),
            _ => Value::Object(Map::new()),
        };
    }
    Ok((key, found))
}

fn value(kind: &str, reader: &mut Reader<'_>, wire: u8, nesting: usize) -> Result<Value, String> {
    if kind.contains('.') {
        let bytes = reader.length_delimited(wire)?;
        return decode_message(kind, bytes, nesting + 1);
    }
    scalar(kind, reader, wire)
}

fn scalar(kind: &str, reader: &mut Reader<'_>, wire: u8) -> Result<Value, String> {
    let wrong = || Err(format!("a {kind} field has wire type {wire}"));
    Ok(match (kind, wire) {
        ("string", 2) => Value::String(utf8(reader.length_delimited(2)?)?),
        ("bytes", 2) => Value::String(
            base64::engine::general_purpose::STANDARD.encode(reader.length_delimited(2)?),
        ),
        ("bool", 0) => Value::Bool(reader.varint()? != 0),
        ("int32", 0) => json!(reader.varint()? as i64 as i32),
        ("int64", 0) => json!(reader.varint()? as i64),
        ("uint32", 0) => json!(reader.varint()? as u32),
        ("uint64", 0) => json!(reader.varint()?),
        ("sint32" | "sint64", 0) => {
            let raw = reader.varint()?;
            json!(((raw >> 1) as i64) ^ -((raw & 1) as i64))
        }
        ("double" | "fixed64", 1) => {
            let raw = u64::from_le_bytes(reader.fixed::<8>()?);
            if kind == "double" {
                json!(f64::from_bits(raw))
            } else {
                json!(raw)
            }
        }
        ("float" | "fixed32", 5) => {
            let raw = u32::from_le_bytes(reader.fixed::<4>()?);
            if kind == "float" {
                json!(f32::from_bits(raw))
            } else {
                json!(raw)
            }
        }
        _ => return wrong(),
    })
}

/// The JSON of the messages whose JSON is not their fields.
fn special(name: &str, mut fields: Map<String, Value>) -> Value {
    let take = |fields: &mut Map<String, Value>, key: &str| fields.remove(key);
    let Some((package, message)) = name.rsplit_once('.') else {
        return Value::Object(fields);
    };
    match (package, message) {
        (META, "Time" | "MicroTime") => {
            let seconds = fields.get("seconds").and_then(Value::as_i64).unwrap_or(0);
            let nanos = fields.get("nanos").and_then(Value::as_i64).unwrap_or(0);
            if seconds == GO_ZERO_TIME || (seconds == 0 && nanos == 0 && fields.is_empty()) {
                return Value::Null;
            }
            let Ok(time) = jiff::Timestamp::new(seconds, nanos as i32) else {
                return Value::Null;
            };
            let format = if message == "Time" {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            Value::String(time.strftime(format).to_string())
        }
        (META, "Duration") => {
            let nanos = fields.get("duration").and_then(Value::as_i64).unwrap_or(0);
            Value::String(go_duration(nanos))
        }
        ("k8s.io.apimachinery.pkg.api.resource", "Quantity") => {
            take(&mut fields, "string").unwrap_or(Value::Null)
        }
        ("k8s.io.apimachinery.pkg.util.intstr", "IntOrString") => {
            match fields.get("type").and_then(Value::as_i64) {
                Some(1) => take(&mut fields, "strVal").unwrap_or(json!("")),
                _ => take(&mut fields, "intVal").unwrap_or(json!(0)),
            }
        }
        ("k8s.io.apimachinery.pkg.runtime", "RawExtension")
        | (EXTENSIONS, "JSON")
        | (META, "FieldsV1") => {
            let raw = take(&mut fields, "raw").or_else(|| take(&mut fields, "Raw"));
            raw.as_ref()
                .and_then(Value::as_str)
                .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or(Value::Null)
        }
        (EXTENSIONS, "JSONSchemaPropsOrArray") => take(&mut fields, "jSONSchemas")
            .or_else(|| take(&mut fields, "schema"))
            .unwrap_or(Value::Null),
        (EXTENSIONS, "JSONSchemaPropsOrBool") => take(&mut fields, "schema")
            .or_else(|| take(&mut fields, "allows"))
            .unwrap_or(json!(false)),
        (EXTENSIONS, "JSONSchemaPropsOrStringArray") => take(&mut fields, "property")
            .or_else(|| take(&mut fields, "schema"))
            .unwrap_or(Value::Null),
        (_, "ExtraValue") => take(&mut fields, "items").unwrap_or(json!([])),
        _ => Value::Object(fields),
    }
}

/// Go's `time.Duration` text: `1h2m3s`, `1.5s`, `0s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let total = nanos.unsigned_abs();
    let (hours, rest) = (total / 3_600_000_000_000, total % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let (seconds, fraction) = (rest / 1_000_000_000, rest % 1_000_000_000);
    let mut out = String::from(sign);
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    let fraction = format!("{fraction:09}");
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        out.push_str(&format!("{seconds}s"));
    } else {
        out.push_str(&format!("{seconds}.{fraction}s"));
    }
    out
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string field is not UTF-8".into())
}

/// The protobuf wire format, read forward.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or("a varint runs past the end")?;
            self.at += 1;
            out |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("a varint is longer than ten bytes".into())
    }

    fn length_delimited(&mut self, wire: u8) -> Result<&'a [u8], String> {
        if wire != 2 {
            return Err(format!("a length-delimited field has wire type {wire}"));
        }
        let length = usize::try_from(self.varint()?).map_err(|_| "a length is too large")?;
        let end = self
            .at
            .checked_add(length)
            .filter(|end| *end <= self.bytes.len())
            .ok_or("a field runs past the end")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let end = self.at + N;
        let out: [u8; N] = self
            .bytes
            .get(self.at..end)
            .and_then(|s| s.try_into().ok())
            .ok_or("a fixed-size field runs past the end")?;
        self.at = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u8) -> Result<(), String> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.fixed::<8>().map(drop),
            2 => self.length_delimited(2).map(drop),
            5 => self.fixed::<4>().map(drop),
            other => Err(format!("unknown wire type {other}")),
        }
    }
}

#[cfg(test)]
mod tests;
