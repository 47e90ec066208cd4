//! The JSON a GET answers for a stored object, spliced from the stored bytes in one pass.
//!
//! A stored object lacks two things its readers see: `metadata.resourceVersion` (the store's
//! revision) and the logical cluster's annotation. Rather than decoding the object into a
//! `Value`, adding them and encoding again, [`served_from_stored`] checks the bytes as JSON
//! in a single loop, notes where the two belong and copies the bytes around them. The cost is
//! one pass over the bytes and one copy, so a bigger object (managedFields, say) costs little
//! more to serve.

/// How a stored object's keys are ordered, which decides where the additions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// Built-in kinds: Kubernetes' struct order (`to_json` writes them so).
    Kubernetes,
    /// Custom resources (and kcp's system kinds): every object's keys sorted, as Kubernetes
    /// writes unstructured objects.
    Sorted,
}

/// ObjectMeta's fields after `resourceVersion`, in Kubernetes' order.
const AFTER_RESOURCE_VERSION: &[&[u8]] = &[
    b"generation",
    b"creationTimestamp",
    b"deletionTimestamp",
    b"deletionGracePeriodSeconds",
    b"labels",
    b"annotations",
    b"ownerReferences",
    b"finalizers",
    b"managedFields",
];

/// ObjectMeta's fields after `annotations`.
const AFTER_ANNOTATIONS: &[&[u8]] = &[b"ownerReferences", b"finalizers", b"managedFields"];

/// Containers at this depth or deeper are left to decoding (the same bound as the stored-object
/// reader's fast path).
const DEEPEST: usize = 128;

/// The JSON an object read back from storage is served as, made from the stored bytes without
/// decoding them: `metadata.resourceVersion` and one annotation added, every key where the
/// stored bytes have it (the store keeps Kubernetes' order), `resourceVersion` where Kubernetes
/// writes it (after `uid`) and the annotation among the sorted annotations.
///
/// `None` when the bytes are not such an object, and then the caller decodes them: not compact
/// JSON (whitespace outside strings), nested [`DEEPEST`] levels or more, no `metadata` object,
/// `annotations` not an object or not sorted, either field already there, or an escape in a key
/// of the object, its metadata or its annotations. Values it does not open are checked as JSON
/// but not read, so a number only decoding refuses passes through as written.
pub fn served_from_stored(
    stored: &[u8],
    resource_version: u64,
    annotation: (&str, &str),
) -> Option<Vec<u8>> {
    served_from_stored_in(KeyOrder::Kubernetes, stored, resource_version, annotation)
}

/// [`served_from_stored`] for stored bytes whose keys are in `order`: with
/// [`KeyOrder::Sorted`], `resourceVersion` goes among metadata's keys where it sorts, and the
/// bytes are refused (`None`) unless metadata's keys are sorted.
pub fn served_from_stored_in(
    order: KeyOrder,
    stored: &[u8],
    resource_version: u64,
    annotation: (&str, &str),
) -> Option<Vec<u8>> {
    splice(order, stored, 0, resource_version, annotation)
}

/// [`served_from_stored`] for a list's item of a built-in kind, which Kubernetes writes
/// without its `kind` and `apiVersion` (the list's own say them; items of custom resources,
/// unstructured there, keep theirs). `None` as there, and also unless the stored object begins
/// with those two members, as built-in kinds are stored.
pub fn listed_from_stored(
    stored: &[u8],
    resource_version: u64,
    annotation: (&str, &str),
) -> Option<Vec<u8>> {
    let skipped = type_meta_members(stored)?;
    splice(
        KeyOrder::Kubernetes,
        stored,
        skipped,
        resource_version,
        annotation,
    )
}

/// The length of the `"kind":"…","apiVersion":"…",` an object's bytes begin with after its
/// brace (strings without escapes), if they do.
fn type_meta_members(stored: &[u8]) -> Option<usize> {
    let mut at = 1;
    for key in [&b"\"kind\":\""[..], &b"\"apiVersion\":\""[..]] {
        if stored.first() != Some(&b'{') || !stored.get(at..)?.starts_with(key) {
            return None;
        }
        at += key.len();
        let end = at
            + stored
                .get(at..)?
                .iter()
                .position(|byte| matches!(byte, b'"' | b'\\'))?;
        if stored[end] != b'"' || stored.get(end + 1) != Some(&b',') {
            return None;
        }
        at = end + 2;
    }
    Some(at - 1)
}

/// The answer of `stored` with `skipped` bytes after its opening brace left out (members the
/// walk has checked but that are not answered).
fn splice(
    order: KeyOrder,
    stored: &[u8],
    skipped: usize,
    resource_version: u64,
    annotation: (&str, &str),
) -> Option<Vec<u8>> {
    std::str::from_utf8(stored).ok()?;
    let places = Walk::new(stored, annotation.0.as_bytes(), order).run()?;
    let metadata = places.metadata?;

    let mut version = Vec::with_capacity(40);
    version.extend_from_slice(b"\"resourceVersion\":\"");
    version.extend_from_slice(resource_version.to_string().as_bytes());
    version.push(b'"');
    let mut entry = Vec::with_capacity(annotation.0.len() + annotation.1.len() + 8);
    serde_json::to_writer(&mut entry, annotation.0).ok()?;
    entry.push(b':');
    serde_json::to_writer(&mut entry, annotation.1).ok()?;

    // Where each goes: before a member (a comma follows it) or at the closing brace of an
    // object (a comma precedes it once the object has members). Both metadata inserts may
    // meet at metadata's closing brace (or, sorted, before the same key): the resourceVersion
    // first in Kubernetes' order, the annotations first in sorted order.
    let mut inserts: Vec<Insert> = Vec::with_capacity(2);
    inserts.push(Insert::member(
        &metadata,
        METADATA,
        metadata.before_resource_version,
        version,
    ));
    match &places.annotations {
        Some(annotations) => inserts.push(Insert::member(
            annotations,
            ANNOTATIONS,
            annotations.before_entry,
            entry,
        )),
        None => {
            let mut member = Vec::with_capacity(entry.len() + 16);
            member.extend_from_slice(b"\"annotations\":{");
            member.extend_from_slice(&entry);
            member.push(b'}');
            inserts.push(Insert::member(
                &metadata,
                METADATA,
                metadata.before_annotations,
                member,
            ));
        }
    }
    if order == KeyOrder::Sorted {
        inserts.reverse();
    }
    inserts.sort_by_key(|insert| insert.at);

    let extra: usize = inserts.iter().map(|insert| insert.text.len() + 1).sum();
    let mut out = Vec::with_capacity(stored.len() + extra);
    let mut members = [
        metadata.members,
        places.annotations.as_ref().map_or(0, |a| a.members),
    ];
    let mut copied = 0;
    if skipped > 0 {
        out.push(b'{');
        copied = 1 + skipped;
    }
    for insert in inserts {
        out.extend_from_slice(&stored[copied..insert.at]);
        copied = insert.at;
        if insert.closing {
            if members[insert.object] > 0 {
                out.push(b',');
            }
            out.extend_from_slice(&insert.text);
        } else {
            out.extend_from_slice(&insert.text);
            out.push(b',');
        }
        members[insert.object] += 1;
    }
    out.extend_from_slice(&stored[copied..]);
    Some(out)
}

const METADATA: usize = 0;
const ANNOTATIONS: usize = 1;

/// Text to put into the stored bytes.
struct Insert {
    at: usize,
    text: Vec<u8>,
    /// At the object's closing brace rather than before a member.
    closing: bool,
    /// [`METADATA`] or [`ANNOTATIONS`].
    object: usize,
}

impl Insert {
    /// `text` as a member of `object`, before the member at `before` or else at its end.
    fn member(object: &Members, which: usize, before: Option<usize>, text: Vec<u8>) -> Insert {
        Insert {
            at: before.unwrap_or(object.close),
            text,
            closing: before.is_none(),
            object: which,
        }
    }
}

/// What the walk found of an object (metadata or its annotations).
#[derive(Default)]
struct Members {
    /// Offset of the closing brace.
    close: usize,
    members: usize,
    /// Offset of the first member the new one goes before (metadata: `resourceVersion`).
    before_resource_version: Option<usize>,
    /// Metadata: offset of the first member `annotations` goes before.
    before_annotations: Option<usize>,
    /// Annotations: offset of the first key sorting after the new one.
    before_entry: Option<usize>,
}

/// Where the additions go, found by [`Walk::run`].
#[derive(Default)]
struct Places {
    metadata: Option<Members>,
    annotations: Option<Members>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Top,
    Metadata,
    Annotations,
    Other,
}

struct Frame {
    array: bool,
    role: Role,
}

enum Next {
    Value,
    AfterValue,
    Key,
}

/// One pass over JSON text: checks it and notes where the additions go.
struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
    annotation: &'a [u8],
    stack: Vec<Frame>,
    places: Places,
    /// The role of the object the value about to be read must be (set by its key).
    pending: Role,
    /// The last annotation key read, for the order check.
    last_key: Option<(usize, usize)>,
    order: KeyOrder,
    /// The last metadata key read, for the order check of [`KeyOrder::Sorted`].
    last_metadata_key: Option<(usize, usize)>,
}

impl<'a> Walk<'a> {
    fn new(bytes: &'a [u8], annotation: &'a [u8], order: KeyOrder) -> Self {
        Walk {
            bytes,
            at: 0,
            annotation,
            stack: Vec::with_capacity(16),
            places: Places::default(),
            pending: Role::Top,
            last_key: None,
            order,
            last_metadata_key: None,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn run(mut self) -> Option<Places> {
        let mut next = Next::Value;
        loop {
            next = match next {
                Next::Value => self.value()?,
                Next::Key => self.key()?,
                Next::AfterValue => {
                    let Some(frame) = self.stack.last() else {
                        return (self.at == self.bytes.len()).then_some(self.places);
                    };
                    let array = frame.array;
                    match (self.peek()?, array) {
                        (b',', true) => {
                            self.at += 1;
                            self.pending = Role::Other;
                            Next::Value
                        }
                        (b',', false) => {
                            self.at += 1;
                            Next::Key
                        }
                        (b']', true) | (b'}', false) => {
                            self.close();
                            self.at += 1;
                            Next::AfterValue
                        }
                        _ => return None,
                    }
                }
            };
        }
    }

    /// Reads a value: a scalar whole, a container's opening (and its end when empty).
    fn value(&mut self) -> Option<Next> {
        let role = std::mem::replace(&mut self.pending, Role::Other);
        let byte = self.peek()?;
        if role != Role::Other && byte != b'{' {
            return None;
        }
        match byte {
            b'{' | b'[' => {
                if self.stack.len() + 1 >= DEEPEST {
                    return None;
                }
                let array = byte == b'[';
                self.stack.push(Frame { array, role });
                match role {
                    Role::Metadata => self.places.metadata = Some(Members::default()),
                    Role::Annotations => self.places.annotations = Some(Members::default()),
                    Role::Top | Role::Other => {}
                }
                self.at += 1;
                match (self.peek()?, array) {
                    (b'}', false) | (b']', true) => {
                        self.close();
                        self.at += 1;
                        Some(Next::AfterValue)
                    }
                    (_, true) => Some(Next::Value),
                    (_, false) => Some(Next::Key),
                }
            }
            b'"' => self.string().map(|_| Next::AfterValue),
            b'-' | b'0'..=b'9' => self.number().map(|_| Next::AfterValue),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    /// Reads a member's key and its colon, noting what the object's role asks.
    fn key(&mut self) -> Option<Next> {
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        let escaped = self.string()?;
        let key = &self.bytes[start + 1..self.at - 1];
        let role = self.stack.last()?.role;
        if role != Role::Other && escaped {
            return None;
        }
        match role {
            Role::Top if key == b"metadata" => {
                if self.places.metadata.is_some() {
                    return None;
                }
                self.pending = Role::Metadata;
            }
            Role::Metadata => {
                let metadata = self.places.metadata.as_mut()?;
                metadata.members += 1;
                if key == b"resourceVersion" {
                    return None;
                }
                if key == b"annotations" {
                    if self.places.annotations.is_some() {
                        return None;
                    }
                    self.pending = Role::Annotations;
                }
                let (after_resource_version, after_annotations) = match self.order {
                    KeyOrder::Kubernetes => (
                        AFTER_RESOURCE_VERSION.contains(&key),
                        AFTER_ANNOTATIONS.contains(&key),
                    ),
                    KeyOrder::Sorted => {
                        if let Some((from, to)) = self.last_metadata_key
                            && self.bytes[from..to] >= *key
                        {
                            return None;
                        }
                        self.last_metadata_key = Some((start + 1, self.at - 1));
                        (key > b"resourceVersion", key > b"annotations")
                    }
                };
                if metadata.before_resource_version.is_none() && after_resource_version {
                    metadata.before_resource_version = Some(start);
                }
                if metadata.before_annotations.is_none() && after_annotations {
                    metadata.before_annotations = Some(start);
                }
            }
            Role::Annotations => {
                if let Some((from, to)) = self.last_key
                    && self.bytes[from..to] >= *key
                {
                    return None;
                }
                self.last_key = Some((start + 1, self.at - 1));
                let annotations = self.places.annotations.as_mut()?;
                annotations.members += 1;
                match key.cmp(self.annotation) {
                    std::cmp::Ordering::Equal => return None,
                    std::cmp::Ordering::Greater if annotations.before_entry.is_none() => {
                        annotations.before_entry = Some(start)
                    }
                    _ => {}
                }
            }
            Role::Top | Role::Other => {}
        }
        if self.peek()? != b':' {
            return None;
        }
        self.at += 1;
        Some(Next::Value)
    }

    /// Ends the innermost container (at its closing bracket).
    fn close(&mut self) {
        if let Some(frame) = self.stack.pop() {
            let members = match frame.role {
                Role::Metadata => self.places.metadata.as_mut(),
                Role::Annotations => self.places.annotations.as_mut(),
                Role::Top | Role::Other => None,
            };
            if let Some(members) = members {
                members.close = self.at;
            }
        }
    }

    /// Reads a string; whether it held an escape.
    fn string(&mut self) -> Option<bool> {
        let bytes = self.bytes;
        let mut at = self.at + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time while none of them ends the run (most of a string).
            while let Some(word) = bytes.get(at..at + 8) {
                let word = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
                if ends_run(word) {
                    break;
                }
                at += 8;
            }
            while let Some(&byte) = bytes.get(at)
                && byte >= 0x20
                && byte != b'"'
                && byte != b'\\'
            {
                at += 1;
            }
            match bytes.get(at)? {
                b'"' => {
                    self.at = at + 1;
                    return Some(escaped);
                }
                b'\\' => {
                    escaped = true;
                    match bytes.get(at + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => at += 2,
                        b'u' => {
                            let hex = bytes.get(at + 2..at + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            at += 6;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// Reads a number as JSON writes it.
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<Next> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| {
            self.at = end;
            Next::AfterValue
        })
    }
}

/// Whether any of the eight bytes of `word` ends a string's plain run: a quote, a backslash or
/// a control character (the classic "has a byte below n" test on each byte at once: exact about
/// whether one is there, not about which).
fn ends_run(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |word: u64, n: u64| word.wrapping_sub(ONES * n) & !word & HIGH;
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    (below(word, 0x20) | below(quote, 1) | below(backslash, 1)) != 0
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::json::decode_stored;

    #[test]
    fn listed_items_of_built_in_kinds_leave_their_type_out() {
        let stored = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","uid":"u"},"data":{"kind":"x"}}"#;
        let listed = listed_from_stored(stored.as_bytes(), 9, ("kcp.io/cluster", "root"));
        assert_eq!(
            String::from_utf8(listed.unwrap()).unwrap(),
            r#"{"metadata":{"name":"c","uid":"u","resourceVersion":"9","annotations":{"kcp.io/cluster":"root"}},"data":{"kind":"x"}}"#
        );
        // Only where both lead the object, unescaped; else decoding answers.
        for text in [
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#,
            r#"{"kind":"ConfigMap","metadata":{}}"#,
            r#"{"kind":"Config\u004dap","apiVersion":"v1","metadata":{}}"#,
            r#"{"kind":"ConfigMap","apiVersion":"v1"}"#,
            r#"{"metadata":{}}"#,
        ] {
            assert_eq!(
                listed_from_stored(text.as_bytes(), 1, ("kcp.io/cluster", "root")),
                None,
                "{text}"
            );
        }
    }

    #[test]
    fn served_bytes_say_what_decoding_would_in_the_stored_order() {
        let objects = [
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"default","uid":"u","creationTimestamp":"2024-01-01T00:00:00Z","annotations":{"x":"y"},"managedFields":[{"manager":"m"}]},"data":{"a":"1","b":"\u00e9\n"}}"#,
            r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"n","labels":{"a":"b"},"finalizers":["f"]},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active","x":1.5e300}}"#,
            r#"{"metadata":{}}"#,
        ];
        for text in objects {
            let served = served_from_stored(text.as_bytes(), 42, ("kcp.io/cluster", "root"))
                .unwrap_or_else(|| panic!("{text}"));
            let mut expected = decode_stored(text.as_bytes()).unwrap();
            expected["metadata"]["resourceVersion"] = Value::String("42".into());
            expected["metadata"]["annotations"]["kcp.io/cluster"] = Value::String("root".into());
            assert_eq!(decode_stored(&served).unwrap(), expected, "{text}");
        }
        // Kubernetes' order: resourceVersion after uid, annotations after labels, stored
        // order otherwise.
        let served = served_from_stored(objects[0].as_bytes(), 42, ("kcp.io/cluster", "root"));
        assert_eq!(
            String::from_utf8(served.unwrap()).unwrap(),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"default","uid":"u","resourceVersion":"42","creationTimestamp":"2024-01-01T00:00:00Z","annotations":{"kcp.io/cluster":"root","x":"y"},"managedFields":[{"manager":"m"}]},"data":{"a":"1","b":"\u00e9\n"}}"#
        );
        let served = served_from_stored(objects[1].as_bytes(), 7, ("kcp.io/cluster", "root"));
        assert!(
            String::from_utf8(served.unwrap()).unwrap().contains(
                r#""metadata":{"name":"n","resourceVersion":"7","labels":{"a":"b"},"annotations":{"kcp.io/cluster":"root"},"finalizers":["f"]}"#
            )
        );
        // Anything else is left to decoding.
        for text in [
            r#"{"kind":"X"}"#,
            r#"{"metadata":[]}"#,
            r#"{"metadata":{"annotations":null}}"#,
            r#"{"metadata":{"resourceVersion":"1"}}"#,
            r#"{"metadata":{"annotations":{"kcp.io/cluster":"a"}}}"#,
            "not json",
            r#"{"metadata":{}} trailing"#,
            // Not compact, unsorted or escaped annotations, keys this pass does not read.
            r#"{"metadata": {}}"#,
            r#"{"metadata":{"annotations":{"b":"1","a":"2"}}}"#,
            r#"{"metadata":{"annotations":{"a":"1","a":"2"}}}"#,
            r#"{"metadata":{"annotations":{"\u0061":"1"}}}"#,
            r#"{"metad\u0061ta":{},"metadata":{}}"#,
            r#"{"metadata":{"resourceV\u0065rsion":"1"}}"#,
            r#"{"metadata":{},"metadata":{}}"#,
            r#"{"metadata":{"annotations":{},"annotations":{}}}"#,
            // Broken JSON anywhere.
            r#"{"metadata":{},"x":[1,]}"#,
            r#"{"metadata":{},"x":01}"#,
            r#"{"metadata":{},"x":1.}"#,
            r#"{"metadata":{},"x":"\q"}"#,
            r#"{"metadata":{},"x":"\u12g4"}"#,
            r#"{"metadata":{},"x":tru}"#,
            r#"{"metadata":{},"x":{"a"}}"#,
            r#"{"metadata":{},"x":{1:2}}"#,
            r#"{"metadata":{},"x":[}"#,
            "{\"metadata\":{},\"x\":\"\u{1}\"}",
            r#"{"metadata":{}"#,
            r#"[]"#,
            r#""metadata""#,
        ] {
            assert_eq!(
                served_from_stored(text.as_bytes(), 1, ("kcp.io/cluster", "root")),
                None,
                "{text}"
            );
        }
        let deep = format!(
            r#"{{"metadata":{{}},"x":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(served_from_stored(deep.as_bytes(), 1, ("k", "v")), None);
        assert_eq!(served_from_stored(&[b'{', 0xff, b'}'], 1, ("k", "v")), None);
    }

    #[test]
    fn runs_end_at_quotes_backslashes_and_control_bytes_anywhere_in_a_word() {
        assert!(!ends_run(u64::from_le_bytes(*b"abcdefgh")));
        assert!(!ends_run(u64::from_le_bytes([
            0xff, 0x80, 0x7f, b' ', b'!', b'#', b']', b'~'
        ])));
        for at in 0..8 {
            for byte in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
                let mut word = *b"abcdefgh";
                word[at] = byte;
                assert!(ends_run(u64::from_le_bytes(word)), "{byte:#x} at {at}");
            }
        }
        // Every byte value alone in a word of plain bytes.
        for byte in 0..=255u8 {
            let mut word = [b'x'; 8];
            word[3] = byte;
            let expected = byte < 0x20 || byte == b'"' || byte == b'\\';
            assert_eq!(ends_run(u64::from_le_bytes(word)), expected, "{byte:#x}");
        }
    }

    #[test]
    fn sorted_objects_get_their_additions_where_they_sort() {
        let annotation = ("kcp.io/cluster", "root");
        let cases = [
            r#"{"metadata":{}}"#,
            r#"{"metadata":{"name":"a"},"spec":{}}"#,
            r#"{"apiVersion":"v","metadata":{"annotations":{"a":"1","z":"2"},"creationTimestamp":"t","name":"a","uid":"u"},"status":{"phase":"Ready"}}"#,
            r#"{"metadata":{"annotations":{"a":"1"},"finalizers":["f"],"generation":2,"managedFields":[{"b":{"a":1}}],"name":"a"}}"#,
            r#"{"metadata":{"uid":"u"}}"#,
            r#"{"metadata":{"annotations":{}}}"#,
        ];
        for stored in cases {
            let served = served_from_stored_in(KeyOrder::Sorted, stored.as_bytes(), 9, annotation)
                .unwrap_or_else(|| panic!("{stored} is served from its bytes"));
            // What decoding, adding both and encoding again gives: every key sorted.
            let mut decoded: serde_json::Value = serde_json::from_str(stored).unwrap();
            decoded["metadata"]["resourceVersion"] = "9".into();
            decoded["metadata"]["annotations"][annotation.0] = annotation.1.into();
            assert_eq!(
                String::from_utf8(served).unwrap(),
                serde_json::to_string(&decoded).unwrap(),
                "{stored}"
            );
        }
        // Metadata out of order is left to decoding.
        let unsorted = br#"{"metadata":{"uid":"u","name":"a"}}"#;
        assert_eq!(
            served_from_stored_in(KeyOrder::Sorted, unsorted, 9, annotation),
            None
        );
        assert!(served_from_stored_in(KeyOrder::Kubernetes, unsorted, 9, annotation).is_some());
    }

    #[test]
    fn additions_go_where_kubernetes_writes_them() {
        let cases = [
            (
                r#"{"metadata":{}}"#,
                r#"{"metadata":{"resourceVersion":"9","annotations":{"k":"v"}}}"#,
            ),
            (
                r#"{"metadata":{"name":"a"},"x":[]}"#,
                r#"{"metadata":{"name":"a","resourceVersion":"9","annotations":{"k":"v"}},"x":[]}"#,
            ),
            (
                r#"{"metadata":{"annotations":{}}}"#,
                r#"{"metadata":{"resourceVersion":"9","annotations":{"k":"v"}}}"#,
            ),
            (
                r#"{"metadata":{"annotations":{"a":"1","z":"2"}}}"#,
                r#"{"metadata":{"resourceVersion":"9","annotations":{"a":"1","k":"v","z":"2"}}}"#,
            ),
            (
                r#"{"metadata":{"annotations":{"a":"1"}}}"#,
                r#"{"metadata":{"resourceVersion":"9","annotations":{"a":"1","k":"v"}}}"#,
            ),
            (
                r#"{"metadata":{"uid":"u","finalizers":[]}}"#,
                r#"{"metadata":{"uid":"u","resourceVersion":"9","annotations":{"k":"v"},"finalizers":[]}}"#,
            ),
            (
                r#"{"metadata":{"generation":1,"managedFields":[{"a":[{"b":null}]}]},"y":{"s":"\"}\\"}}"#,
                r#"{"metadata":{"resourceVersion":"9","generation":1,"annotations":{"k":"v"},"managedFields":[{"a":[{"b":null}]}]},"y":{"s":"\"}\\"}}"#,
            ),
            (
                r#"{"a":{"metadata":{}},"metadata":{"labels":{"x":"y"}},"n":[-0.5e+3,true,false,null]}"#,
                r#"{"a":{"metadata":{}},"metadata":{"resourceVersion":"9","labels":{"x":"y"},"annotations":{"k":"v"}},"n":[-0.5e+3,true,false,null]}"#,
            ),
        ];
        for (stored, served) in cases {
            let got = served_from_stored(stored.as_bytes(), 9, ("k", "v")).expect(stored);
            assert_eq!(String::from_utf8(got).unwrap(), served, "{stored}");
        }
        // The annotation is written as JSON.
        let got = served_from_stored(br#"{"metadata":{}}"#, 1, ("a\"b", "\n")).unwrap();
        assert_eq!(
            String::from_utf8(got).unwrap(),
            r#"{"metadata":{"resourceVersion":"1","annotations":{"a\"b":"\n"}}}"#
        );
    }
}
