//! `metadata.managedFields` as a list of owners: who (manager, operation, apiVersion,
//! subresource), when, and which fields; read from and written back to an object as
//! Kubernetes does (`FieldsV1`, sorted Apply first, then by time, manager, apiVersion,
//! subresource; empty sets dropped).

use serde_json::{Map, Value, json};

use crate::fieldpath::Set;

/// Whether an owner applied its fields or wrote them with an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One owner of fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub subresource: String,
    /// RFC 3339, seconds.
    pub time: Option<String>,
    pub fields: Set,
}

impl Entry {
    /// Whether `self` and `other` are the same owner: appliers are one owner whatever
    /// apiVersion they applied with; updaters are one per apiVersion.
    pub fn same_owner(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// How conflicts name this owner: `"m"`, `"m" with subresource "status"`, and for
    /// updaters `using v1 at <time>`.
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
            if let Some(time) = &self.time {
                out.push_str(&format!(" at {time}"));
            }
        }
        out
    }

    fn to_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), json!(self.manager));
        entry.insert("operation".into(), json!(self.operation.as_str()));
        entry.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            entry.insert("time".into(), json!(time));
        }
        entry.insert("fieldsType".into(), json!("FieldsV1"));
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            entry.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(entry)
    }
}

/// What a write's `metadata.managedFields` says.
#[derive(Debug)]
pub enum Provided {
    /// Absent (or `null`): keep the live object's.
    Absent,
    /// `[]` or `[{}]`: clear them.
    Reset,
    /// Entries that decoded.
    Entries(Vec<Entry>),
    /// Something that does not decode (ignored, as Kubernetes ignores it).
    Invalid(String),
}

/// Reads `metadata.managedFields` of `object`.
pub fn provided(object: &Value) -> Provided {
    match object.get("metadata").and_then(|m| m.get("managedFields")) {
        None | Some(Value::Null) => Provided::Absent,
        Some(Value::Array(items)) if items.is_empty() => Provided::Reset,
        Some(Value::Array(items))
            if items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty) =>
        {
            Provided::Reset
        }
        Some(value) => match decode(value) {
            Ok(entries) if entries.is_empty() => Provided::Absent,
            Ok(entries) => Provided::Entries(entries),
            Err(message) => Provided::Invalid(message),
        },
    }
}

/// The entries of the managedFields of `object` (none if absent or undecodable).
pub fn of(object: &Value) -> Vec<Entry> {
    match provided(object) {
        Provided::Entries(entries) => entries,
        _ => Vec::new(),
    }
}

/// Decodes a managedFields list.
pub fn decode(value: &Value) -> Result<Vec<Entry>, String> {
    let Value::Array(items) = value else {
        return Err("managedFields must be a list".into());
    };
    let mut entries: Vec<Entry> = Vec::with_capacity(items.len());
    // Where each owner's entry is, so a repeated owner costs a lookup, not a scan.
    let mut positions: std::collections::HashMap<(String, Operation, String, String), usize> =
        std::collections::HashMap::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("fieldsType") {
            "FieldsV1" => {}
            "" => {
                return Err(format!(
                    "missing fieldsType in managed fields entry {index}"
                ));
            }
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {index}"
                ));
            }
        }
        let operation = match text("operation") {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => {
                return Err(format!(
                    "invalid operation {other:?} in managed fields entry {index}"
                ));
            }
        };
        let fields = match item.get("fieldsV1") {
            None | Some(Value::Null) => Set::new(),
            Some(fields) => Set::from_fields_v1(fields)
                .map_err(|e| format!("error decoding versioned set of entry {index}: {e}"))?,
        };
        let entry = Entry {
            manager: text("manager").to_string(),
            operation,
            api_version: text("apiVersion").to_string(),
            subresource: text("subresource").to_string(),
            time: item.get("time").and_then(Value::as_str).map(str::to_string),
            fields,
        };
        // A repeated owner: the later entry stands, as in Kubernetes' map.
        let owner = (
            entry.manager.clone(),
            entry.operation,
            match entry.operation {
                Operation::Apply => String::new(),
                Operation::Update => entry.api_version.clone(),
            },
            entry.subresource.clone(),
        );
        match positions.get(&owner) {
            Some(&at) => entries[at] = entry,
            None => {
                positions.insert(owner, entries.len());
                entries.push(entry);
            }
        }
    }
    Ok(entries)
}

/// The managedFields list of `entries`: empty sets dropped, sorted as Kubernetes sorts them.
pub fn encode(entries: &[Entry]) -> Value {
    let mut kept: Vec<&Entry> = entries.iter().filter(|e| !e.fields.is_empty()).collect();
    kept.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| seconds(p.time.as_deref()).cmp(&seconds(q.time.as_deref())))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    Value::Array(kept.into_iter().map(Entry::to_json).collect())
}

/// Seconds since the epoch of an RFC 3339 time (0 if absent or unreadable).
fn seconds(time: Option<&str>) -> i64 {
    time.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.timestamp())
        .unwrap_or(0)
}

/// Writes `entries` as `object`'s managedFields (removing the field when none is left).
pub fn set(object: &mut Value, entries: &[Entry]) {
    let encoded = encode(entries);
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if encoded.as_array().is_some_and(Vec::is_empty) {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), encoded);
    }
}

/// The maximum number of updaters kept apart; older ones merge into `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// Merges the oldest updaters into one `ancient-changes` entry per apiVersion while there
/// are more than [`MAX_UPDATE_MANAGERS`].
pub fn cap_updaters(entries: &mut Vec<Entry>) {
    let updaters = entries
        .iter()
        .filter(|e| e.operation == Operation::Update)
        .count();
    if updaters <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut order: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == Operation::Update)
        .collect();
    order.sort_by(|&i, &j| {
        seconds(entries[i].time.as_deref())
            .cmp(&seconds(entries[j].time.as_deref()))
            .then_with(|| entries[i].manager.cmp(&entries[j].manager))
    });
    let mut excess = updaters - MAX_UPDATE_MANAGERS;
    let mut merged: Vec<Entry> = Vec::new();
    // Per apiVersion: the oldest updater seen (kept as it is unless a second one comes),
    // then the bucket both went into.
    let mut first_of_version: std::collections::HashMap<String, usize> = Default::default();
    let mut bucket_of_version: std::collections::HashMap<String, usize> = Default::default();
    let mut dropped = vec![false; entries.len()];
    for i in order {
        if excess == 0 {
            break;
        }
        let entry = &entries[i];
        let version = &entry.api_version;
        if let Some(&at) = bucket_of_version.get(version) {
            let bucket = &mut merged[at];
            bucket.fields.add(&entry.fields);
            bucket.time = entry.time.clone();
        } else if let Some(&first) = first_of_version.get(version) {
            let first_entry = &entries[first];
            bucket_of_version.insert(version.clone(), merged.len());
            merged.push(Entry {
                manager: "ancient-changes".into(),
                operation: Operation::Update,
                api_version: version.clone(),
                subresource: String::new(),
                time: entry.time.clone(),
                fields: first_entry.fields.union(&entry.fields),
            });
            dropped[first] = true;
        } else {
            first_of_version.insert(version.clone(), i);
            continue;
        }
        dropped[i] = true;
        excess -= 1;
    }
    let mut kept: Vec<Entry> = entries
        .drain(..)
        .zip(dropped)
        .filter_map(|(entry, dropped)| (!dropped).then_some(entry))
        .collect();
    // An `ancient-changes` entry kept from before takes its version's bucket in.
    let mut ancient: std::collections::HashMap<String, usize> = kept
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.manager == "ancient-changes"
                && e.operation == Operation::Update
                && e.subresource.is_empty()
        })
        .map(|(i, e)| (e.api_version.clone(), i))
        .collect();
    for bucket in merged {
        match ancient.get(&bucket.api_version) {
            Some(&at) => {
                let existing = &mut kept[at];
                existing.fields.add(&bucket.fields);
                existing.time = bucket.time;
            }
            None => {
                ancient.insert(bucket.api_version.clone(), kept.len());
                kept.push(bucket);
            }
        }
    }
    *entries = kept;
}
