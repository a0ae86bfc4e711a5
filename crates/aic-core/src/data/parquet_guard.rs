//! Bounds on the sizes a parquet file declares, checked before the parquet reader trusts them.
//!
//! The parquet reader sizes its buffers from numbers written in the file — a schema node's
//! child count, a page's uncompressed size — before it can know whether they are true. A few
//! hostile or corrupt bytes can then ask for gigabytes (the fuzzer found a schema node claiming
//! 790 million children: a 6 GB allocation), and an allocation failure aborts the process
//! instead of returning an error. This module reads those numbers first, with a small walker
//! over the Thrift compact encoding the format uses, and rejects any file whose claims do not
//! fit what a perf table can be. Every shipped table passes with a wide margin
//! (`every_shipped_table_fits_the_bounds`).

use parquet::file::metadata::ParquetMetaData;

/// Deepest schema nesting accepted. Perf tables are flat (depth 1); the reader builds the
/// schema tree recursively, so an unbounded chain of nested groups could exhaust the stack.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 16;

/// Largest uncompressed page accepted (bytes). The largest page of a shipped table is well
/// under 4 MiB; the reader allocates (and for Snappy zero-fills) a page's declared size up
/// front.
pub(crate) const MAX_PAGE_BYTES: i64 = 64 << 20;

/// Largest total of declared uncompressed page sizes in one file (bytes): bounds the work of
/// decompressing a file whose pages each stay under [`MAX_PAGE_BYTES`].
pub(crate) const MAX_FILE_UNCOMPRESSED_BYTES: i64 = 512 << 20;

/// Most values a single page may declare (the reader decodes at most this many per page).
pub(crate) const MAX_PAGE_VALUES: i64 = 1 << 24;

/// Most cells (rows × leaf columns) a table may claim: a few bytes of run-length encoding can
/// claim millions of values per column, and every claimed cell becomes eight decoded bytes.
/// The largest shipped table holds about 4 million cells.
pub(crate) const MAX_TABLE_CELLS: i64 = 1 << 25;

/// Deepest nesting of Thrift structs, lists and maps walked.
const MAX_THRIFT_DEPTH: u32 = 32;

type Claim<T> = std::result::Result<T, String>;

// Thrift compact-protocol element types.
const T_BOOL_TRUE: u8 = 1;
const T_BOOL_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

/// A cursor over Thrift compact-protocol bytes that reads integers and skips everything else.
struct Compact<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Compact<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Compact { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn byte(&mut self) -> Claim<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| "metadata ends inside a value".to_string())?;
        self.pos += 1;
        Ok(b)
    }

    fn advance(&mut self, n: usize) -> Claim<()> {
        if n > self.remaining() {
            return Err(format!("a value claims {n} bytes where {} remain", self.remaining()));
        }
        self.pos += n;
        Ok(())
    }

    fn varint(&mut self) -> Claim<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("an integer runs over ten bytes".to_string())
    }

    fn zigzag(&mut self) -> Claim<i64> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// An integer field of any integer type, widened to i64.
    fn int(&mut self, ty: u8) -> Claim<Option<i64>> {
        match ty {
            T_I16 | T_I32 | T_I64 => self.zigzag().map(Some),
            T_BYTE => self.byte().map(|b| Some(i64::from(b as i8))),
            _ => {
                self.skip(ty, 0)?;
                Ok(None)
            }
        }
    }

    /// The next field header of a struct: `None` at the struct's end.
    fn field(&mut self, last_id: &mut i64) -> Claim<Option<(i64, u8)>> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let ty = b & 0x0f;
        let delta = i64::from(b >> 4);
        *last_id = if delta == 0 { self.zigzag()? } else { *last_id + delta };
        Ok(Some((*last_id, ty)))
    }

    /// A list or set header: (element count, element type), the count bounded by the bytes
    /// left (every element takes at least one byte).
    fn list(&mut self) -> Claim<(usize, u8)> {
        let b = self.byte()?;
        let ty = b & 0x0f;
        let mut n = u64::from(b >> 4);
        if n == 15 {
            n = self.varint()?;
        }
        if n > self.remaining() as u64 {
            return Err(format!("a list claims {n} elements in {} bytes", self.remaining()));
        }
        Ok((n as usize, ty))
    }

    fn skip(&mut self, ty: u8, depth: u32) -> Claim<()> {
        if depth > MAX_THRIFT_DEPTH {
            return Err(format!("metadata nests deeper than {MAX_THRIFT_DEPTH} levels"));
        }
        match ty {
            T_BOOL_TRUE | T_BOOL_FALSE => Ok(()),
            T_BYTE => self.advance(1),
            T_I16 | T_I32 | T_I64 => self.varint().map(|_| ()),
            T_DOUBLE => self.advance(8),
            T_BINARY => {
                let n = self.varint()?;
                self.advance(usize::try_from(n).map_err(|_| format!("a string claims {n} bytes"))?)
            }
            T_LIST | T_SET => {
                let (n, elem) = self.list()?;
                for _ in 0..n {
                    self.skip_element(elem, depth + 1)?;
                }
                Ok(())
            }
            T_MAP => {
                let n = self.varint()?;
                if n == 0 {
                    return Ok(());
                }
                if n > self.remaining() as u64 {
                    return Err(format!("a map claims {n} entries in {} bytes", self.remaining()));
                }
                let kv = self.byte()?;
                for _ in 0..n {
                    self.skip_element(kv >> 4, depth + 1)?;
                    self.skip_element(kv & 0x0f, depth + 1)?;
                }
                Ok(())
            }
            T_STRUCT => self.skip_struct(depth + 1),
            other => Err(format!("unknown Thrift type {other}")),
        }
    }

    /// Skips one list, set or map element: a boolean element takes a byte there.
    fn skip_element(&mut self, ty: u8, depth: u32) -> Claim<()> {
        match ty {
            T_BOOL_TRUE | T_BOOL_FALSE => self.advance(1),
            _ => self.skip(ty, depth),
        }
    }

    fn skip_struct(&mut self, depth: u32) -> Claim<()> {
        let mut last = 0;
        while let Some((_, ty)) = self.field(&mut last)? {
            self.skip(ty, depth)?;
        }
        Ok(())
    }

    /// Walks a struct, handing integer fields to `on_int` and sub-structs to `on_struct`
    /// (which must consume them); everything else is skipped.
    fn walk_struct(
        &mut self,
        on_int: &mut dyn FnMut(i64, i64) -> Claim<()>,
        on_struct: &mut dyn FnMut(&mut Self, i64) -> Claim<()>,
    ) -> Claim<()> {
        let mut last = 0;
        while let Some((id, ty)) = self.field(&mut last)? {
            match ty {
                T_STRUCT => on_struct(self, id)?,
                T_BYTE | T_I16 | T_I32 | T_I64 => {
                    if let Some(v) = self.int(ty)? {
                        on_int(id, v)?;
                    }
                }
                _ => self.skip(ty, 1)?,
            }
        }
        Ok(())
    }
}

/// The Thrift bytes of the footer's file metadata: `None` when the file is too short or does
/// not end with the plain parquet magic (the reader reports those itself).
fn footer_metadata(bytes: &[u8]) -> Option<&[u8]> {
    let n = bytes.len();
    if n < 12 || &bytes[n - 4..] != b"PAR1" {
        return None;
    }
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().ok()?) as usize;
    let start = (n - 8).checked_sub(len)?;
    Some(&bytes[start..n - 8])
}

/// Checks the schema of the footer before the reader builds it: every group's child count must
/// fit the elements that follow it, and the nesting stays within [`MAX_SCHEMA_DEPTH`].
/// Footers the reader cannot locate are left to its own error.
pub(crate) fn check_schema_claims(bytes: &[u8]) -> Claim<()> {
    let Some(meta) = footer_metadata(bytes) else {
        return Ok(());
    };
    let mut c = Compact::new(meta);
    let mut last = 0;
    while let Some((id, ty)) = c.field(&mut last)? {
        if id == 2 && ty == T_LIST {
            let (n, elem) = c.list()?;
            if elem != T_STRUCT {
                return Ok(()); // not a schema the reader accepts: its own error follows
            }
            let mut children = Vec::with_capacity(n);
            for _ in 0..n {
                let mut count = None;
                c.walk_struct(
                    &mut |field, v| {
                        if field == 5 {
                            count = Some(v);
                        }
                        Ok(())
                    },
                    &mut |c, _| c.skip_struct(1),
                )?;
                children.push(count);
            }
            return check_schema_tree(&children);
        }
        c.skip(ty, 0)?;
    }
    Ok(())
}

/// The schema's child counts (depth-first, as the footer lists them) against the elements
/// there are and the depth bound.
fn check_schema_tree(children: &[Option<i64>]) -> Claim<()> {
    let n = children.len();
    let mut open: Vec<i64> = Vec::new(); // children still expected by each open group
    for (i, count) in children.iter().enumerate() {
        if let Some(top) = open.last_mut() {
            *top -= 1;
        }
        let count = count.unwrap_or(0);
        let after = (n - i - 1) as i64;
        if !(0..=after).contains(&count) {
            return Err(format!(
                "schema element {i} claims {count} children where {after} elements follow"
            ));
        }
        if count > 0 {
            open.push(count);
            if open.len() > MAX_SCHEMA_DEPTH {
                return Err(format!("schema nests deeper than {MAX_SCHEMA_DEPTH} levels"));
            }
        }
        while open.last() == Some(&0) {
            open.pop();
        }
    }
    Ok(())
}

/// What one page header declares.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct PageClaim {
    uncompressed: i64,
    compressed: i64,
    values: i64,
}

fn read_page_header(c: &mut Compact<'_>) -> Claim<PageClaim> {
    let (mut uncompressed, mut compressed, mut values_max) = (0, 0, 0);
    c.walk_struct(
        &mut |field, v| {
            match field {
                2 => uncompressed = v,
                3 => compressed = v,
                _ => {}
            }
            Ok(())
        },
        &mut |c, field| {
            // 5: data page, 7: dictionary page, 8: data page v2; field 1 of each is the
            // value count. Other sub-structs (index pages) are skipped.
            let mut values = None;
            c.walk_struct(
                &mut |f, v| {
                    if f == 1 {
                        values = Some(v);
                    }
                    Ok(())
                },
                &mut |c, _| c.skip_struct(2),
            )?;
            if matches!(field, 5 | 7 | 8) {
                // Keep the worst claim: a negative count, else the largest.
                let v = values.unwrap_or(0);
                values_max = if v < 0 || values_max < 0 { v.min(values_max) } else { values_max.max(v) };
            }
            Ok(())
        },
    )?;
    Ok(PageClaim { uncompressed, compressed, values: values_max })
}

/// Walks the page headers of every column chunk and checks what they declare: page sizes
/// within [`MAX_PAGE_BYTES`] and inside their chunk, value counts within [`MAX_PAGE_VALUES`],
/// the file's total within [`MAX_FILE_UNCOMPRESSED_BYTES`], and rows × columns within
/// [`MAX_TABLE_CELLS`]. Chunk ranges must already be known to lie inside `bytes`.
pub(crate) fn check_page_claims(bytes: &[u8], meta: &ParquetMetaData) -> Claim<()> {
    let columns = meta.file_metadata().schema_descr().num_columns() as i64;
    let rows = meta.file_metadata().num_rows().max(0);
    if rows.saturating_mul(columns) > MAX_TABLE_CELLS {
        return Err(format!(
            "it claims {rows} rows of {columns} columns, more than the {MAX_TABLE_CELLS} cells a \
             perf table may hold"
        ));
    }
    let mut total: i64 = 0;
    for group in meta.row_groups() {
        for chunk in group.columns() {
            let (start, len) = chunk.byte_range();
            let (start, end) = (start as usize, (start + len) as usize);
            let Some(data) = bytes.get(start..end) else {
                return Err(format!("column \"{}\" lies outside the file", chunk.column_path().string()));
            };
            let mut c = Compact::new(data);
            while c.remaining() > 0 {
                let page = read_page_header(&mut c).map_err(|e| {
                    format!("column \"{}\": unreadable page header ({e})", chunk.column_path().string())
                })?;
                let name = chunk.column_path().string();
                if !(0..=MAX_PAGE_BYTES).contains(&page.uncompressed) || page.compressed < 0 {
                    return Err(format!(
                        "column \"{name}\" has a page of {} bytes ({} compressed); a perf table's \
                         pages hold at most {MAX_PAGE_BYTES}",
                        page.uncompressed, page.compressed
                    ));
                }
                if !(0..=MAX_PAGE_VALUES).contains(&page.values) {
                    return Err(format!(
                        "column \"{name}\" has a page of {} values, more than {MAX_PAGE_VALUES}",
                        page.values
                    ));
                }
                total = total.saturating_add(page.uncompressed);
                if total > MAX_FILE_UNCOMPRESSED_BYTES {
                    return Err(format!(
                        "its pages declare more than {MAX_FILE_UNCOMPRESSED_BYTES} uncompressed bytes"
                    ));
                }
                c.advance(page.compressed as usize).map_err(|_| {
                    format!(
                        "column \"{name}\" has a page of {} compressed bytes past its chunk's end",
                        page.compressed
                    )
                })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Thrift compact bytes of a FileMetaData holding only a schema list, from
    /// (name, num_children) pairs.
    fn footer_with_schema(elements: &[(&str, Option<i32>)]) -> Vec<u8> {
        let mut meta = vec![0x29]; // field 2 (delta 2), list
        assert!(elements.len() < 15);
        meta.push(((elements.len() as u8) << 4) | T_STRUCT);
        for (name, children) in elements {
            meta.push(0x48); // field 4 (delta 4), binary
            meta.push(name.len() as u8);
            meta.extend_from_slice(name.as_bytes());
            if let Some(n) = children {
                meta.push(0x15); // field 5 (delta 1), i32
                let z = ((*n << 1) ^ (*n >> 31)) as u32;
                let mut v = z;
                loop {
                    let b = (v & 0x7f) as u8;
                    v >>= 7;
                    if v == 0 {
                        meta.push(b);
                        break;
                    }
                    meta.push(b | 0x80);
                }
            }
            meta.push(0); // end of element
        }
        meta.push(0); // end of FileMetaData
        let mut file = b"PAR1".to_vec();
        file.extend_from_slice(&meta);
        file.extend_from_slice(&(meta.len() as u32).to_le_bytes());
        file.extend_from_slice(b"PAR1");
        file
    }

    #[test]
    fn a_flat_schema_passes() {
        let f = footer_with_schema(&[("schema", Some(2)), ("a", None), ("b", None)]);
        assert_eq!(check_schema_claims(&f), Ok(()));
    }

    #[test]
    fn a_child_count_beyond_the_elements_is_refused() {
        let f = footer_with_schema(&[("schema", Some(790_000_000)), ("a", None)]);
        let e = check_schema_claims(&f).unwrap_err();
        assert_eq!(e, "schema element 0 claims 790000000 children where 1 elements follow");
        let f = footer_with_schema(&[("schema", Some(-3)), ("a", None)]);
        assert!(check_schema_claims(&f).unwrap_err().contains("claims -3 children"));
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut elements: Vec<(&str, Option<i32>)> = vec![("g", Some(1)); 13];
        elements.push(("leaf", None));
        let f = footer_with_schema(&elements);
        assert_eq!(check_schema_claims(&f), Ok(()), "13 nested groups above a leaf");
        let tree: Vec<Option<i64>> = (0..40).map(|i| if i < 39 { Some(1) } else { None }).collect();
        assert_eq!(
            check_schema_tree(&tree).unwrap_err(),
            format!("schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        );
    }

    #[test]
    fn a_truncated_or_foreign_footer_is_left_to_the_reader() {
        assert_eq!(check_schema_claims(b"PAR1"), Ok(()));
        assert_eq!(check_schema_claims(b"PAR1xxxxxxxxxxxxPARE"), Ok(()));
        // The length field claims more bytes than the file has.
        let mut f = b"PAR1".to_vec();
        f.extend_from_slice(&1000u32.to_le_bytes());
        f.extend_from_slice(b"PAR1");
        assert_eq!(check_schema_claims(&f), Ok(()));
    }

    #[test]
    fn walker_errors_name_the_problem() {
        let mut c = Compact::new(&[0x19, 0xf9, 0xff, 0xff, 0xff, 0x0f]);
        let mut last = 0;
        let (_, ty) = c.field(&mut last).unwrap().unwrap();
        assert_eq!(ty, T_LIST);
        let e = c.list().unwrap_err();
        assert_eq!(e, "a list claims 33554431 elements in 0 bytes");
        let mut c = Compact::new(&[0xff; 12]);
        assert_eq!(c.varint().unwrap_err(), "an integer runs over ten bytes");
    }

    #[test]
    fn page_headers_are_read() {
        // type 0 (data page), uncompressed 100, compressed 40, data_page_header{num_values 7}.
        let header = [0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x50, 0x2c, 0x15, 0x0e, 0x00, 0x00];
        let mut c = Compact::new(&header);
        let claim = read_page_header(&mut c).unwrap();
        assert_eq!(claim, PageClaim { uncompressed: 100, compressed: 40, values: 7 });
        assert_eq!(c.remaining(), 0);
    }

    /// Every shipped table passes, and its largest claims stay far below the bounds (so the
    /// bounds refuse only what no perf table looks like).
    #[test]
    fn every_shipped_table_fits_the_bounds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems/data");
        let mut stack = vec![root];
        let (mut files, mut largest_page, mut largest_cells) = (0, 0i64, 0i64);
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                if path.extension().is_none_or(|e| e != "parquet") {
                    continue;
                }
                let bytes = bytes::Bytes::from(std::fs::read(&path).unwrap());
                check_schema_claims(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                    .parse_and_finish(&bytes)
                    .unwrap();
                check_page_claims(&bytes, &meta).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                for group in meta.row_groups() {
                    for chunk in group.columns() {
                        let (start, len) = chunk.byte_range();
                        let mut c = Compact::new(&bytes[start as usize..(start + len) as usize]);
                        while c.remaining() > 0 {
                            let page = read_page_header(&mut c).unwrap();
                            largest_page = largest_page.max(page.uncompressed);
                            c.advance(page.compressed as usize).unwrap();
                        }
                    }
                }
                let cells = meta.file_metadata().num_rows()
                    * meta.file_metadata().schema_descr().num_columns() as i64;
                largest_cells = largest_cells.max(cells);
                files += 1;
            }
        }
        assert!(files > 100, "found only {files} shipped tables");
        eprintln!("{files} tables; largest page {largest_page} bytes; largest table {largest_cells} cells");
        assert!(largest_page * 16 < MAX_PAGE_BYTES, "largest page {largest_page}");
        assert!(largest_cells * 4 < MAX_TABLE_CELLS, "largest table {largest_cells} cells");
    }
}
