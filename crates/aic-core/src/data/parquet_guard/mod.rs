//! Bounds on the sizes a parquet file declares, checked before the parquet reader trusts them.
//!
//! The parquet reader sizes its buffers from numbers written in the file — a schema node's
//! child count, a page's uncompressed size — before it can know whether they are true. A few
//! hostile or corrupt bytes can then ask for gigabytes (the fuzzer found a schema node claiming
//! 790 million children: a 6 GB allocation), and an allocation failure aborts the process
//! instead of returning an error. So aic reads the schema itself ([`flat_schema`], handed to
//! the reader so it never parses the footer's), and reads every page header before the reader
//! does, with a cursor that decodes the Thrift bytes exactly as the reader will
//! ([`thrift::Compact`]), rejecting any file whose claims do not fit what a perf table can be.
//! Every shipped table passes with a wide margin (`every_shipped_table_fits_the_bounds`).

use parquet::file::metadata::ParquetMetaData;

mod schema;
mod thrift;

pub(crate) use schema::flat_schema;
use thrift::{Claim, Compact, T_BINARY, T_BOOL_FALSE, T_BOOL_TRUE, T_I64, T_STRUCT};

/// Largest uncompressed page accepted (bytes). The largest page of a shipped table holds about
/// 1 MB; the reader allocates (and for Snappy zero-fills) a page's declared size up front.
pub(crate) const MAX_PAGE_BYTES: i64 = 32 << 20;

/// Largest total of declared uncompressed page sizes in one file (bytes): bounds the memory
/// and work of decoding a file whose pages each stay under [`MAX_PAGE_BYTES`] (a few bytes of
/// zstd can expand to megabytes). The largest shipped table is 2.5 MB uncompressed.
pub(crate) const MAX_FILE_UNCOMPRESSED_BYTES: i64 = 64 << 20;

/// Most values a single page may declare (the reader sizes its buffers from this count; the
/// shipped maximum is about 132,000).
pub(crate) const MAX_PAGE_VALUES: i64 = 1 << 21;

/// Most values all pages of one file may declare together, dictionary pages included (the
/// shipped maximum is about 4 million).
pub(crate) const MAX_FILE_VALUES: i64 = 1 << 26;

/// Most bytes the string columns of one table may take once expanded to one string per row
/// (row headers included): a long dictionary value repeated by a few bytes of run-length codes
/// would otherwise expand to gigabytes when read as text.
pub(crate) const MAX_EXPANDED_STRING_BYTES: u64 = 512 << 20;

/// Most cells (rows × leaf columns) a table may claim: a few bytes of run-length encoding can
/// claim millions of values per column, and every claimed cell becomes eight decoded bytes.
/// The largest shipped table holds about 4 million cells.
pub(crate) const MAX_TABLE_CELLS: i64 = 1 << 25;

/// What one page header declares.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct PageClaim {
    uncompressed: i64,
    compressed: i64,
    values: i64,
}

/// Reads one page header as the reader does (known fields by their expected types). The value
/// count kept is the worst any sub-header declares: a negative one, else the largest.
fn read_page_header(c: &mut Compact<'_>) -> Claim<PageClaim> {
    let mut claim = PageClaim::default();
    c.walk_struct(&mut |c, id, _declared| {
        match id {
            1 | 4 => {
                c.i32()?; // page type, crc
            }
            2 => claim.uncompressed = i64::from(c.i32()?),
            3 => claim.compressed = i64::from(c.i32()?),
            5 | 7 | 8 => {
                let values = read_sub_header(c, id)?;
                claim.values = if values < 0 || claim.values < 0 {
                    values.min(claim.values)
                } else {
                    claim.values.max(values)
                };
            }
            6 => c.skip(T_STRUCT)?, // index page header: no fields the reader reads
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(claim)
}

/// A data page (5), dictionary page (7) or data page v2 (8) header: the largest count it
/// declares (values, and for v2 nulls and rows).
fn read_sub_header(c: &mut Compact<'_>, kind: i16) -> Claim<i64> {
    let mut worst = 0i64;
    let mut keep = |v: i32| {
        let v = i64::from(v);
        worst = if v < 0 || worst < 0 { v.min(worst) } else { worst.max(v) };
    };
    c.walk_struct(&mut |c, id, declared| {
        match (kind, id) {
            (_, 1) | (8, 2) | (8, 3) => keep(c.i32()?),
            (5, 2..=4) | (7, 2) | (8, 4..=6) => {
                c.i32()?; // encodings, level byte lengths
            }
            (7, 3) | (8, 7) => bool_declared(declared)?, // the value is the header's type
            (5, 5) | (8, 8) => {
                // Statistics: skipped by the declared type, or read by the expected types when
                // the reader is asked for page statistics. Both read the same bytes only when
                // the declared types are the expected ones, so anything else is refused.
                if declared != T_STRUCT {
                    return Err(format!("page statistics have Thrift type {declared}"));
                }
                read_page_statistics(c)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(worst)
}

fn bool_declared(declared: u8) -> Claim<()> {
    match declared {
        T_BOOL_TRUE | T_BOOL_FALSE => Ok(()),
        other => Err(format!("a boolean page field has Thrift type {other}")),
    }
}

fn read_page_statistics(c: &mut Compact<'_>) -> Claim<()> {
    c.walk_struct(&mut |c, id, declared| {
        let expected = match id {
            1 | 2 | 5 | 6 => T_BINARY,
            3 | 4 | 9 => T_I64,
            7 | 8 => return bool_declared(declared).map(|_| true),
            _ => return Ok(false),
        };
        if declared != expected {
            return Err(format!("page statistics field {id} has Thrift type {declared}, not {expected}"));
        }
        c.skip(declared)?;
        Ok(true)
    })
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
    let (mut total, mut values): (i64, i64) = (0, 0);
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
                values = values.saturating_add(page.values);
                if values > MAX_FILE_VALUES {
                    return Err(format!("its pages declare more than {MAX_FILE_VALUES} values"));
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

    #[test]
    fn page_headers_are_read() {
        // type 0 (data page), uncompressed 100, compressed 40, data_page_header{num_values 7}.
        let header = [0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x50, 0x2c, 0x15, 0x0e, 0x00, 0x00];
        let mut c = Compact::new(&header);
        let claim = read_page_header(&mut c).unwrap();
        assert_eq!(claim, PageClaim { uncompressed: 100, compressed: 40, values: 7 });
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn page_sizes_are_read_whatever_type_the_header_declares() {
        // The uncompressed size (field 2) declared as a boolean: the reader still reads a varint
        // there, and so does the guard (100 MB here).
        let header = [0x15, 0x00, 0x11, 0x80, 0x84, 0xaf, 0x5f, 0x15, 0x50, 0x00];
        let claim = read_page_header(&mut Compact::new(&header)).unwrap();
        assert_eq!(claim.uncompressed, 100_000_000);
    }

    #[test]
    fn statistics_of_another_type_are_refused() {
        // data_page_header{num_values 7, statistics declared as an i32}.
        let header = [0x15, 0x00, 0x15, 0xc8, 0x01, 0x15, 0x50, 0x2c, 0x15, 0x0e, 0x45, 0x02, 0x00, 0x00];
        assert_eq!(
            read_page_header(&mut Compact::new(&header)).unwrap_err(),
            "page statistics have Thrift type 5"
        );
    }

    /// Every shipped table passes, and its largest claims stay far below the bounds (so the
    /// bounds refuse only what no perf table looks like).
    #[test]
    fn every_shipped_table_fits_the_bounds() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems/data");
        let mut stack = vec![root];
        let (mut files, mut largest_page, mut largest_cells, mut largest_file) = (0, 0i64, 0i64, 0i64);
        let (mut most_values, mut most_file_values, mut widest) = (0i64, 0i64, 0usize);
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
                let ours = flat_schema(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                    .parse_and_finish(&bytes)
                    .unwrap();
                let theirs = meta.file_metadata().schema_descr();
                widest = widest.max(theirs.num_columns());
                assert_eq!(ours.root_schema(), theirs.root_schema(), "{}", path.display());
                check_page_claims(&bytes, &meta).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let (mut file_total, mut file_values) = (0, 0);
                for group in meta.row_groups() {
                    for chunk in group.columns() {
                        let (start, len) = chunk.byte_range();
                        let mut c = Compact::new(&bytes[start as usize..(start + len) as usize]);
                        while c.remaining() > 0 {
                            let page = read_page_header(&mut c).unwrap();
                            largest_page = largest_page.max(page.uncompressed);
                            file_total += page.uncompressed;
                            file_values += page.values;
                            most_values = most_values.max(page.values);
                            c.advance(page.compressed as usize).unwrap();
                        }
                    }
                }
                largest_file = largest_file.max(file_total);
                most_file_values = most_file_values.max(file_values);
                let cells = meta.file_metadata().num_rows()
                    * meta.file_metadata().schema_descr().num_columns() as i64;
                largest_cells = largest_cells.max(cells);
                files += 1;
            }
        }
        assert!(files > 100, "found only {files} shipped tables");
        eprintln!(
            "{files} tables; largest page {largest_page} bytes; largest file {largest_file} bytes \
             uncompressed; largest table {largest_cells} cells; most values {most_values} per page, \
             {most_file_values} per file; widest {widest} columns"
        );
        assert!(largest_page * 16 < MAX_PAGE_BYTES, "largest page {largest_page}");
        assert!(largest_file * 4 < MAX_FILE_UNCOMPRESSED_BYTES, "largest file {largest_file}");
        assert!(largest_cells * 4 < MAX_TABLE_CELLS, "largest table {largest_cells} cells");
        assert!(most_values * 8 < MAX_PAGE_VALUES, "{most_values} values in a page");
        assert!(most_file_values * 8 < MAX_FILE_VALUES, "{most_file_values} values in a file");
        assert!(widest * 8 < schema::MAX_COLUMNS, "{widest} columns");
    }
}
