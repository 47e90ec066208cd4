//! The frame of an encoded list: the bytes before its first item, after its last and between
//! two. Every format (JSON, YAML; the list, a Table, a PartialObjectMetadataList) writes the
//! items of a list one after the other within an unchanging frame, so the frame is taken from
//! the encoding of the list without items, and a list is its frame around items encoded on
//! their own (a page of a streamed list, objects' stored answers, Table rows made from them).

use crate::negotiation::Encoding;

/// What an encoded list is around its items.
#[derive(Debug)]
pub(crate) struct ListFrame {
    /// Up to the first item.
    pub prefix: Vec<u8>,
    /// After the last item.
    pub suffix: Vec<u8>,
    /// Between two items.
    pub separator: &'static [u8],
}

impl ListFrame {
    /// The frame of the lists encoded like `empty`, the encoding of the list without items
    /// (the items are `items`, or a Table's `rows`: the list's last array, in every format).
    pub fn new(encoding: Encoding, empty: Vec<u8>) -> Option<ListFrame> {
        let (empty_marker, opening, separator): (&[&[u8]], &[u8], &'static [u8]) = match encoding {
            Encoding::Json => (&[b"\"items\":[]", b"\"rows\":[]"], b"[", b","),
            Encoding::Yaml => (&[b"\nitems: []\n", b"\nrows: []\n"], b": []\n", b""),
        };
        let (at, marker) = empty_marker
            .iter()
            .find_map(|marker| find_last(&empty, marker).map(|at| (at, *marker)))?;
        let (prefix, suffix) = match encoding {
            Encoding::Json => {
                let cut = at + marker.len() - 1;
                (empty[..cut].to_vec(), empty[cut..].to_vec())
            }
            Encoding::Yaml => {
                // `\nitems: []\n` becomes `\nitems:\n` and the sequence's lines.
                let key_end = at + marker.len() - opening.len();
                let mut prefix = empty[..key_end].to_vec();
                prefix.extend_from_slice(b":\n");
                (prefix, empty[at + marker.len()..].to_vec())
            }
        };
        Some(ListFrame {
            prefix,
            suffix,
            separator,
        })
    }

    /// The items of a list with items encoded in this frame; `None` when `encoded` is not in
    /// the frame.
    pub fn items<'e>(&self, encoded: &'e [u8]) -> Option<&'e [u8]> {
        if encoded.starts_with(&self.prefix)
            && encoded.ends_with(&self.suffix)
            && encoded.len() >= self.prefix.len() + self.suffix.len()
        {
            return Some(&encoded[self.prefix.len()..encoded.len() - self.suffix.len()]);
        }
        None
    }
}

fn find_last(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .rposition(|window| window == needle)
}
