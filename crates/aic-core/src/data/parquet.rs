//! Reads one perf-table parquet file into plain column vectors (spec 10 §1 LFS check, §2).
//! Columns are resolved by name; integers widen to `i64`, floats to `f64`, strings
//! (`Utf8`, `LargeUtf8`, views, dictionaries) to `String`. Rows keep file order.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;

use super::parquet_guard;
use crate::error::{AicError, Result};

/// Rows per decoded batch: large enough to amortise per-batch work, small enough for the
/// allocator to recycle the batch buffers.
const BATCH_ROWS: usize = 65_536;

/// Magic text at the start of an unresolved Git LFS pointer file.
const LFS_POINTER_PREFIX: &[u8] = b"version https://git-lfs";

/// One decoded column.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    /// Any integer column, widened to i64.
    Int(Vec<i64>),
    /// Any floating-point column, widened to f64.
    Float(Vec<f64>),
    /// A string column (nulls read as empty strings).
    Str(Vec<String>),
}

impl Column {
    /// The type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Column::Int(_) => "integer",
            Column::Float(_) => "float",
            Column::Str(_) => "string",
        }
    }

    fn len(&self) -> usize {
        match self {
            Column::Int(v) => v.len(),
            Column::Float(v) => v.len(),
            Column::Str(v) => v.len(),
        }
    }
}

/// The decoded contents of one parquet file (all or a projection of its columns).
#[derive(Debug, Clone)]
pub struct RawTable {
    /// The file read.
    pub path: PathBuf,
    /// Number of rows.
    pub num_rows: usize,
    columns: Vec<(String, Stored)>,
}

fn file_error(path: &Path, message: impl Into<String>) -> AicError {
    AicError::DataFile {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Checks existence, size and magic before the parquet reader sees the file.
fn open_checked(path: &Path) -> Result<File> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(file_error(path, "file not found"))
        }
        Err(e) => return Err(file_error(path, format!("cannot open file: {e}"))),
    };
    let len = file
        .metadata()
        .map_err(|e| file_error(path, format!("cannot stat file: {e}")))?
        .len();
    if len == 0 {
        return Err(file_error(path, "empty file (0 bytes)"));
    }
    let mut head = [0u8; 23];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(file_error(path, format!("cannot read file: {e}"))),
        }
    }
    check_head(path, &head[..got])?;
    Ok(file)
}

/// Rejects a Git LFS pointer or anything else that does not start with the parquet magic.
fn check_head(path: &Path, head: &[u8]) -> Result<()> {
    if head.starts_with(LFS_POINTER_PREFIX) {
        return Err(file_error(
            path,
            "unresolved Git LFS pointer, not parquet data; run `git lfs pull` in the data \
             repository to fetch the real file",
        ));
    }
    if !head.starts_with(b"PAR1") {
        return Err(file_error(
            path,
            "not a parquet file (the file does not start with the PAR1 magic)",
        ));
    }
    Ok(())
}

/// A column while batches are appended: strings are interned into a first-seen dictionary.
enum Building {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Str {
        codes: Vec<u32>,
        dict: Vec<String>,
        index: HashMap<String, u32>,
    },
}

impl Building {
    fn len(&self) -> usize {
        match self {
            Building::Int(v) => v.len(),
            Building::Float(v) => v.len(),
            Building::Str { codes, .. } => codes.len(),
        }
    }

    fn intern(dict: &mut Vec<String>, index: &mut HashMap<String, u32>, s: &str) -> u32 {
        if let Some(&c) = index.get(s) {
            return c;
        }
        let c = dict.len() as u32;
        dict.push(s.to_string());
        index.insert(s.to_string(), c);
        c
    }

    fn finish(self) -> Stored {
        match self {
            Building::Int(v) => Stored::Ready(Column::Int(v)),
            Building::Float(v) => Stored::Ready(Column::Float(v)),
            Building::Str { codes, dict, .. } => Stored::Coded {
                codes,
                dict,
                full: OnceLock::new(),
            },
        }
    }
}

/// A decoded column as kept by [`RawTable`]; strings stay dictionary-coded until asked for.
#[derive(Debug, Clone)]
enum Stored {
    Ready(Column),
    Coded {
        codes: Vec<u32>,
        dict: Vec<String>,
        full: OnceLock<Column>,
    },
}

impl Stored {
    fn column(&self) -> &Column {
        match self {
            Stored::Ready(c) => c,
            Stored::Coded { codes, dict, full } => full.get_or_init(|| {
                Column::Str(codes.iter().map(|&c| dict[c as usize].clone()).collect())
            }),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Stored::Ready(c) => c.type_name(),
            Stored::Coded { .. } => "string",
        }
    }

    /// Bytes a dictionary-coded string column takes once expanded to one `String` per row
    /// (what [`Stored::column`] builds on demand): 0 for other columns.
    fn expanded_bytes(&self) -> u64 {
        match self {
            Stored::Ready(_) => 0,
            Stored::Coded { codes, dict, .. } => {
                let text: u64 = codes.iter().map(|&c| dict[c as usize].len() as u64).sum();
                text + (codes.len() * std::mem::size_of::<String>()) as u64
            }
        }
    }
}

fn changed(path: &Path, name: &str) -> AicError {
    file_error(
        path,
        format!("parquet column \"{name}\" changes type between batches"),
    )
}

fn null_err(path: &Path, name: &str, array: &dyn Array, row_offset: usize) -> AicError {
    let row = (0..array.len()).find(|&i| array.is_null(i)).unwrap_or(0) + row_offset;
    file_error(
        path,
        format!("parquet column \"{name}\" has a null value at row {row}"),
    )
}

/// Appends the string values of a (non-dictionary) string array.
fn append_strings<'a>(
    path: &Path,
    name: &str,
    values: impl Iterator<Item = Option<&'a str>>,
    len: usize,
    out: &mut Option<Building>,
) -> Result<()> {
    let b = out.get_or_insert_with(|| Building::Str {
        codes: Vec::with_capacity(len),
        dict: Vec::new(),
        index: HashMap::new(),
    });
    let Building::Str { codes, dict, index } = b else {
        return Err(changed(path, name));
    };
    let mut last: Option<(&str, u32)> = None;
    for v in values {
        let s = v.unwrap_or("");
        let c = match last {
            Some((prev, c)) if prev == s => c,
            _ => {
                let c = Building::intern(dict, index, s);
                last = Some((s, c));
                c
            }
        };
        codes.push(c);
    }
    Ok(())
}

/// Appends the values of one arrow array to a column (created on the first batch).
fn append(
    path: &Path,
    name: &str,
    array: &ArrayRef,
    row_offset: usize,
    cap: usize,
    out: &mut Option<Building>,
) -> Result<()> {
    macro_rules! ints {
        ($t:ty) => {{
            if array.null_count() > 0 {
                return Err(null_err(path, name, array.as_ref(), row_offset));
            }
            let a = array.as_primitive::<$t>();
            let Building::Int(v) =
                out.get_or_insert_with(|| Building::Int(Vec::with_capacity(cap)))
            else {
                return Err(changed(path, name));
            };
            v.extend(a.values().iter().map(|&x| x as i64));
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            if array.null_count() > 0 {
                return Err(null_err(path, name, array.as_ref(), row_offset));
            }
            let a = array.as_primitive::<$t>();
            let Building::Float(v) =
                out.get_or_insert_with(|| Building::Float(Vec::with_capacity(cap)))
            else {
                return Err(changed(path, name));
            };
            v.extend(a.values().iter().map(|&x| x as f64));
        }};
    }
    match array.data_type() {
        DataType::Int64 => ints!(Int64Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int8 => ints!(Int8Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt64 => {
            if array.null_count() > 0 {
                return Err(null_err(path, name, array.as_ref(), row_offset));
            }
            let a = array.as_primitive::<UInt64Type>();
            let Building::Int(v) =
                out.get_or_insert_with(|| Building::Int(Vec::with_capacity(cap)))
            else {
                return Err(changed(path, name));
            };
            for (i, &x) in a.values().iter().enumerate() {
                let x = i64::try_from(x).map_err(|_| {
                    file_error(
                        path,
                        format!(
                            "parquet column \"{name}\" value {x} at row {} overflows i64",
                            i + row_offset
                        ),
                    )
                })?;
                v.push(x);
            }
        }
        DataType::Float64 => floats!(Float64Type),
        DataType::Float32 => floats!(Float32Type),
        DataType::Utf8 => {
            append_strings(path, name, array.as_string::<i32>().iter(), cap, out)?
        }
        DataType::LargeUtf8 => {
            append_strings(path, name, array.as_string::<i64>().iter(), cap, out)?
        }
        DataType::Utf8View => {
            append_strings(path, name, array.as_string_view().iter(), cap, out)?
        }
        DataType::Dictionary(_, value_type)
            if matches!(
                value_type.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            let dict = array
                .as_any_dictionary_opt()
                .ok_or_else(|| file_error(path, format!("bad dictionary column \"{name}\"")))?;
            let values = dict.values();
            // The batch's dictionary values, read as one small string column.
            let mut local: Option<Building> = None;
            append(path, name, values, 0, values.len(), &mut local)?;
            let Some(Building::Str {
                codes: local_codes,
                dict: local_dict,
                ..
            }) = local
            else {
                return Err(file_error(path, format!("bad dictionary column \"{name}\"")));
            };
            let b = out.get_or_insert_with(|| Building::Str {
                codes: Vec::with_capacity(cap),
                dict: Vec::new(),
                index: HashMap::new(),
            });
            let Building::Str { codes, dict: global, index } = b else {
                return Err(changed(path, name));
            };
            // Value slot -> global code, assigned at first use so codes follow row order.
            let mut remap: Vec<Option<u32>> = vec![None; local_codes.len()];
            let mut empty: Option<u32> = None;
            codes.reserve(array.len());
            let nulls = array.logical_nulls();
            let mut push = |i: usize, k: usize| -> Result<()> {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    let e = *empty.get_or_insert_with(|| Building::intern(global, index, ""));
                    codes.push(e);
                    return Ok(());
                }
                let slot = remap.get_mut(k).ok_or_else(|| {
                    file_error(path, format!("bad dictionary key in column \"{name}\""))
                })?;
                let c = match *slot {
                    Some(c) => c,
                    None => {
                        let c =
                            Building::intern(global, index, &local_dict[local_codes[k] as usize]);
                        *slot = Some(c);
                        c
                    }
                };
                codes.push(c);
                Ok(())
            };
            match array.as_dictionary_opt::<Int32Type>() {
                Some(d) => {
                    for (i, &k) in d.keys().values().iter().enumerate() {
                        push(i, usize::try_from(k).unwrap_or(usize::MAX))?;
                    }
                }
                None => {
                    for (i, k) in dict.normalized_keys().into_iter().enumerate() {
                        push(i, k)?;
                    }
                }
            }
        }
        DataType::Null => {
            return Err(file_error(
                path,
                format!("parquet column \"{name}\" has a null value at row {row_offset}"),
            ))
        }
        other => {
            return Err(file_error(
                path,
                format!("parquet column \"{name}\" has unsupported type {other}"),
            ))
        }
    }
    Ok(())
}

/// Most rows a perf table may claim. The largest shipped table has about 0.2 M rows; the bound
/// stops a corrupt or hostile footer (a few bytes can claim billions of run-length-encoded
/// rows) from exhausting memory, which would abort the process.
const MAX_TABLE_ROWS: i64 = 1 << 24;

/// Rejects footers the reader would trust blindly: a row count that is negative or beyond
/// [`MAX_TABLE_ROWS`], and column chunks that start or end outside the file.
fn check_footer(path: &Path, meta: &parquet::file::metadata::ParquetMetaData, file_len: u64) -> Result<()> {
    let corrupt = |what: String| file_error(path, format!("corrupt parquet footer: {what}; restore the file from the data package"));
    let mut rows: i64 = 0;
    for group in meta.row_groups() {
        if group.num_rows() < 0 {
            return Err(corrupt(format!("a row group claims {} rows", group.num_rows())));
        }
        rows = rows.saturating_add(group.num_rows());
        for chunk in group.columns() {
            let start = chunk.dictionary_page_offset().unwrap_or_else(|| chunk.data_page_offset());
            let len = chunk.compressed_size();
            let end = u64::try_from(start).ok().zip(u64::try_from(len).ok()).and_then(|(s, l)| s.checked_add(l));
            if end.is_none_or(|end| end > file_len) {
                return Err(corrupt(format!(
                    "column \"{}\" claims {len} bytes from offset {start} in a {file_len}-byte file",
                    chunk.column_path().string()
                )));
            }
        }
    }
    let claimed = meta.file_metadata().num_rows();
    if !(0..=MAX_TABLE_ROWS).contains(&claimed) || rows > MAX_TABLE_ROWS {
        return Err(corrupt(format!(
            "it claims {} rows ({rows} in its row groups), more than the {MAX_TABLE_ROWS} a perf table may hold",
            claimed
        )));
    }
    Ok(())
}

/// The file schema with every string field asked for as `Dictionary(Int32, <string type>)`, so
/// the reader hands over dictionary pages without expanding them row by row.
fn dictionary_hint(schema: &Schema) -> Option<SchemaRef> {
    let mut any = false;
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 => {
                any = true;
                f.as_ref().clone().with_data_type(DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(f.data_type().clone()),
                ))
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    any.then(|| Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())))
}

impl RawTable {
    /// Reads every column of a file.
    pub fn read(path: &Path) -> Result<RawTable> {
        Self::read_impl(path, None)
    }

    /// Reads only the columns of `wanted` that the file has (absent ones are simply missing).
    pub fn read_columns(path: &Path, wanted: &[&str]) -> Result<RawTable> {
        Self::read_impl(path, Some(wanted))
    }

    /// Decodes a parquet file held in memory, with the checks of [`RawTable::read`] (empty,
    /// Git LFS pointer, magic, schema, nulls). `label` only names the data in errors; nothing
    /// is read from disk. The entry point for tables that do not live in files, and for fuzzing.
    pub fn from_parquet_bytes(label: &Path, bytes: &[u8], wanted: Option<&[&str]>) -> Result<RawTable> {
        if bytes.is_empty() {
            return Err(file_error(label, "empty file (0 bytes)"));
        }
        check_head(label, &bytes[..bytes.len().min(LFS_POINTER_PREFIX.len())])?;
        Self::decode(label, bytes::Bytes::copy_from_slice(bytes), wanted)
    }

    fn read_impl(path: &Path, wanted: Option<&[&str]>) -> Result<RawTable> {
        let mut file = open_checked(path)?;
        // The whole file in memory (the largest perf table is a few MB): the size checks of
        // `parquet_guard` read its footer and page headers before the reader does.
        let mut bytes = Vec::new();
        file.seek(std::io::SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| file_error(path, format!("cannot read file: {e}")))?;
        Self::decode(path, bytes::Bytes::from(bytes), wanted)
    }

    /// Decodes with the parquet reader, turning a panic of the reader (it panics on some
    /// corrupt pages, see docs/fuzzing.md) into a [`AicError::DataFile`] instead of unwinding
    /// into the caller.
    fn decode(path: &Path, file: bytes::Bytes, wanted: Option<&[&str]>) -> Result<RawTable> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Self::decode_unguarded(path, file, wanted))) {
            Ok(result) => result,
            Err(payload) => {
                let reason = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(file_error(
                    path,
                    format!("corrupt parquet file: the reader failed on it ({reason}); restore the file from the data package"),
                ))
            }
        }
    }

    fn decode_unguarded(path: &Path, file: bytes::Bytes, wanted: Option<&[&str]>) -> Result<RawTable> {
        let perr = |e: parquet::errors::ParquetError| file_error(path, format!("parquet: {e}"));
        // aic reads the schema itself: the reader would size its schema tree from unchecked
        // child counts (see `parquet_guard`), and skips the footer's schema when given one.
        let schema = parquet_guard::flat_schema(&file).map_err(|what| {
            file_error(path, format!("corrupt parquet footer: {what}; restore the file from the data package"))
        })?;
        let options = ArrowReaderOptions::new()
            .with_parquet_schema(Arc::new(schema))
            .with_page_index_policy(PageIndexPolicy::Skip);
        let mut meta = ArrowReaderMetadata::load(&file, options).map_err(perr)?;
        check_footer(path, meta.metadata(), file.len() as u64)?;
        parquet_guard::check_page_claims(&file, meta.metadata()).map_err(|what| {
            file_error(path, format!("corrupt parquet file: {what}; restore the file from the data package"))
        })?;
        if let Some(hint) = dictionary_hint(meta.schema()) {
            // Fall back to the plain schema if the hint is refused.
            if let Ok(m) = ArrowReaderMetadata::try_new(
                Arc::clone(meta.metadata()),
                ArrowReaderOptions::new().with_schema(hint),
            ) {
                meta = m;
            }
        }
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta);
        let schema = Arc::clone(builder.schema());
        let num_rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let indices: Vec<usize> = schema
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| wanted.is_none_or(|w| w.contains(&f.name().as_str())))
            .map(|(i, _)| i)
            .collect();
        let names: Vec<String> = indices
            .iter()
            .map(|&i| schema.field(i).name().clone())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), indices.iter().copied());
        let reader = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(perr)?;
        let mut cols: Vec<Option<Building>> = names.iter().map(|_| None).collect();
        let mut rows = 0usize;
        for batch in reader {
            let batch = batch.map_err(|e| file_error(path, format!("parquet: {e}")))?;
            if batch.num_columns() != names.len() {
                return Err(file_error(
                    path,
                    format!(
                        "parquet batch has {} columns, expected {}",
                        batch.num_columns(),
                        names.len()
                    ),
                ));
            }
            for (j, name) in names.iter().enumerate() {
                append(path, name, batch.column(j), rows, num_rows, &mut cols[j])?;
            }
            rows += batch.num_rows();
        }
        let mut columns = Vec::with_capacity(names.len());
        for (name, col) in names.into_iter().zip(cols) {
            let col = match col {
                Some(c) => c,
                None => empty_column(schema.field_with_name(&name).map(|f| f.data_type())),
            };
            if col.len() != rows {
                return Err(file_error(
                    path,
                    format!("parquet column \"{name}\" has {} values for {rows} rows", col.len()),
                ));
            }
            columns.push((name, col.finish()));
        }
        // A few bytes of run-length codes can repeat a long dictionary string millions of
        // times: bound what the string columns become when read as text.
        let expanded: u64 = columns.iter().map(|(_, c)| c.expanded_bytes()).sum();
        if expanded > parquet_guard::MAX_EXPANDED_STRING_BYTES {
            return Err(file_error(
                path,
                format!(
                    "corrupt parquet file: its string columns expand to {expanded} bytes of text, more \
                     than the {} a perf table may hold; restore the file from the data package",
                    parquet_guard::MAX_EXPANDED_STRING_BYTES
                ),
            ));
        }
        Ok(RawTable {
            path: path.to_path_buf(),
            num_rows: rows,
            columns,
        })
    }

    /// Builds a table from columns (for tests and synthetic data); all must have `num_rows` values.
    pub fn from_columns(path: PathBuf, columns: Vec<(String, Column)>) -> Result<RawTable> {
        let num_rows = columns.first().map_or(0, |(_, c)| c.len());
        if let Some((name, _)) = columns.iter().find(|(_, c)| c.len() != num_rows) {
            return Err(file_error(
                &path,
                format!("column \"{name}\" length differs from {num_rows}"),
            ));
        }
        Ok(RawTable {
            path,
            num_rows,
            columns: columns
                .into_iter()
                .map(|(n, c)| (n, Stored::Ready(c)))
                .collect(),
        })
    }

    /// True when the column was read.
    pub fn has(&self, name: &str) -> bool {
        self.columns.iter().any(|(n, _)| n == name)
    }

    /// Names of the columns read, in file order.
    pub fn column_names(&self) -> Vec<&str> {
        self.columns.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The columns stored as floats, by name (no string column is expanded).
    pub fn float_columns(&self) -> impl Iterator<Item = (&str, &[f64])> {
        self.columns.iter().filter_map(|(n, c)| match c {
            Stored::Ready(Column::Float(v)) => Some((n.as_str(), v.as_slice())),
            _ => None,
        })
    }

    fn stored(&self, name: &str) -> Option<&Stored> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The column of that name, if read (a string column is expanded on first access).
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.stored(name).map(Stored::column)
    }

    fn missing(&self, name: &str) -> AicError {
        file_error(
            &self.path,
            format!(
                "parquet column \"{name}\" missing (have: [{}])",
                self.columns
                    .iter()
                    .map(|(n, _)| format!("\"{n}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }

    fn wrong_type(&self, name: &str, expected: &str, actual: &Stored) -> AicError {
        file_error(
            &self.path,
            format!(
                "parquet column \"{name}\" has type {}, expected {expected}",
                actual.type_name()
            ),
        )
    }

    /// An integer column.
    pub fn int(&self, name: &str) -> Result<&[i64]> {
        self.opt_int(name)?.ok_or_else(|| self.missing(name))
    }

    /// A float column; integer columns are converted.
    pub fn float(&self, name: &str) -> Result<Cow<'_, [f64]>> {
        self.opt_float(name)?.ok_or_else(|| self.missing(name))
    }

    /// A string column (expanded to one `String` per row on first access; loaders that only
    /// compare values should prefer [`Self::str_codes`]).
    pub fn str(&self, name: &str) -> Result<&[String]> {
        self.opt_str(name)?.ok_or_else(|| self.missing(name))
    }

    /// A string column as per-row codes into its distinct values (first-seen order): the fast
    /// way to read string keys.
    pub fn str_codes(&self, name: &str) -> Result<StrCodes<'_>> {
        self.opt_str_codes(name)?.ok_or_else(|| self.missing(name))
    }

    /// An integer column, `None` when absent.
    pub fn opt_int(&self, name: &str) -> Result<Option<&[i64]>> {
        match self.stored(name) {
            None => Ok(None),
            Some(Stored::Ready(Column::Int(v))) => Ok(Some(v)),
            Some(other) => Err(self.wrong_type(name, "integer", other)),
        }
    }

    /// A float column (integers converted), `None` when absent.
    pub fn opt_float(&self, name: &str) -> Result<Option<Cow<'_, [f64]>>> {
        match self.stored(name) {
            None => Ok(None),
            Some(Stored::Ready(Column::Float(v))) => Ok(Some(Cow::Borrowed(v))),
            Some(Stored::Ready(Column::Int(v))) => {
                Ok(Some(Cow::Owned(v.iter().map(|&x| x as f64).collect())))
            }
            Some(other) => Err(self.wrong_type(name, "float", other)),
        }
    }

    /// A string column, `None` when absent.
    pub fn opt_str(&self, name: &str) -> Result<Option<&[String]>> {
        match self.stored(name) {
            None => Ok(None),
            Some(s @ (Stored::Coded { .. } | Stored::Ready(Column::Str(_)))) => match s.column() {
                Column::Str(v) => Ok(Some(v)),
                _ => Err(self.wrong_type(name, "string", s)),
            },
            Some(other) => Err(self.wrong_type(name, "string", other)),
        }
    }

    /// A string column as codes, `None` when absent.
    pub fn opt_str_codes(&self, name: &str) -> Result<Option<StrCodes<'_>>> {
        match self.stored(name) {
            None => Ok(None),
            Some(Stored::Coded { codes, dict, .. }) => Ok(Some(StrCodes {
                codes: Cow::Borrowed(codes),
                values: Cow::Borrowed(dict),
            })),
            Some(Stored::Ready(Column::Str(v))) => {
                let mut dict = Vec::new();
                let mut index = HashMap::new();
                let codes = v
                    .iter()
                    .map(|s| Building::intern(&mut dict, &mut index, s))
                    .collect();
                Ok(Some(StrCodes {
                    codes: Cow::Owned(codes),
                    values: Cow::Owned(dict),
                }))
            }
            Some(other) => Err(self.wrong_type(name, "string", other)),
        }
    }
}

/// A dictionary-coded string column: row `i` holds `values[codes[i]]`.
#[derive(Debug, Clone)]
pub struct StrCodes<'a> {
    /// One code per row.
    pub codes: Cow<'a, [u32]>,
    /// The distinct values, in first-seen row order.
    pub values: Cow<'a, [String]>,
}

impl StrCodes<'_> {
    /// The value of row `i`.
    pub fn get(&self, i: usize) -> &str {
        &self.values[self.codes[i] as usize]
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// The code of a value, if it occurs.
    pub fn code_of(&self, value: &str) -> Option<u32> {
        self.values.iter().position(|v| v == value).map(|p| p as u32)
    }
}

/// The empty column of a file with no rows, typed from the schema.
fn empty_column(dt: std::result::Result<&DataType, arrow_schema::ArrowError>) -> Building {
    match dt {
        Ok(t) if t.is_integer() => Building::Int(Vec::new()),
        Ok(t) if t.is_floating() => Building::Float(Vec::new()),
        _ => Building::Str {
            codes: Vec::new(),
            dict: Vec::new(),
            index: HashMap::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        Float32Array, Float64Array, Int32Array, Int64Array, LargeStringArray, RecordBatch,
        StringArray,
    };
    use arrow_schema::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;

    fn data_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/systems/data")
    }

    fn temp_file(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        std::env::temp_dir().join(format!(
            "aic_parquet_{tag}_{}_{}.parquet",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ))
    }

    fn data_msg(err: AicError) -> String {
        match err {
            AicError::DataFile { message, .. } => message,
            other => panic!("expected DataFile, got {other:?}"),
        }
    }

    fn write_batches(path: &Path, schema: Arc<Schema>, batches: &[RecordBatch], c: Compression) {
        let props = WriterProperties::builder()
            .set_compression(c)
            .set_max_row_group_row_count(Some(3))
            .build();
        let file = File::create(path).unwrap();
        let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
        for b in batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
    }

    fn synthetic(path: &Path, c: Compression, with_null: bool) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("kernel_source", DataType::Utf8, true),
            Field::new("op", DataType::LargeUtf8, false),
            Field::new("m", DataType::Int64, false),
            Field::new("k", DataType::Int32, false),
            Field::new("latency", DataType::Float64, with_null),
            Field::new("power", DataType::Float32, false),
        ]));
        let b1 = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec![Some("a"), None, Some("b"), Some("c")])),
                Arc::new(LargeStringArray::from(vec!["x", "y", "z", "w"])),
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(Int32Array::from(vec![10, 20, 30, 40])),
                Arc::new(Float64Array::from(vec![0.5, 1.5, 2.5, 3.5])),
                Arc::new(Float32Array::from(vec![1.0, 2.0, 3.0, 4.0])),
            ],
        )
        .unwrap();
        let lat: Float64Array = if with_null {
            Float64Array::from(vec![Some(4.5), None])
        } else {
            Float64Array::from(vec![4.5, 5.5])
        };
        let b2 = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["d", "e"])),
                Arc::new(LargeStringArray::from(vec!["v", "u"])),
                Arc::new(Int64Array::from(vec![5, i64::MAX])),
                Arc::new(Int32Array::from(vec![50, 60])),
                Arc::new(lat),
                Arc::new(Float32Array::from(vec![5.0, 6.0])),
            ],
        )
        .unwrap();
        write_batches(path, schema, &[b1, b2], c);
    }

    #[test]
    fn reads_multi_row_group_files_zstd_and_snappy() {
        for c in [
            Compression::ZSTD(ZstdLevel::default()),
            Compression::SNAPPY,
            Compression::UNCOMPRESSED,
        ] {
            let path = temp_file("ok");
            synthetic(&path, c, false);
            let t = RawTable::read(&path).unwrap();
            assert_eq!(t.num_rows, 6);
            assert_eq!(
                t.column_names(),
                vec!["kernel_source", "op", "m", "k", "latency", "power"]
            );
            assert_eq!(t.str("kernel_source").unwrap(), &["a", "", "b", "c", "d", "e"]);
            assert_eq!(t.str("op").unwrap(), &["x", "y", "z", "w", "v", "u"]);
            let codes = t.str_codes("kernel_source").unwrap();
            assert_eq!(codes.len(), 6);
            assert_eq!(codes.get(1), "");
            assert_eq!(codes.get(5), "e");
            assert_eq!(codes.values.as_ref(), &["a", "", "b", "c", "d", "e"]);
            assert_eq!(codes.code_of("c"), Some(3));
            assert!(t.str_codes("m").is_err());
            assert!(t.opt_str_codes("nope").unwrap().is_none());
            assert!(matches!(t.column("op"), Some(Column::Str(v)) if v.len() == 6));
            assert_eq!(t.int("m").unwrap(), &[1, 2, 3, 4, 5, i64::MAX]);
            assert_eq!(t.int("k").unwrap(), &[10, 20, 30, 40, 50, 60]);
            assert_eq!(&*t.float("latency").unwrap(), &[0.5, 1.5, 2.5, 3.5, 4.5, 5.5]);
            assert_eq!(&*t.float("power").unwrap(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
            // ints convert to floats
            assert_eq!(&*t.float("k").unwrap(), &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
            assert!(t.opt_int("nope").unwrap().is_none());
            assert!(t.opt_float("nope").unwrap().is_none());
            assert!(t.opt_str("nope").unwrap().is_none());
            // wrong types
            let msg = data_msg(t.int("latency").unwrap_err());
            assert!(msg.contains("\"latency\"") && msg.contains("expected integer"), "{msg}");
            let msg = data_msg(t.str("m").unwrap_err());
            assert!(msg.contains("expected string"), "{msg}");
            assert!(t.float("op").is_err());
            // projection
            let p = RawTable::read_columns(&path, &["latency", "m", "absent"]).unwrap();
            assert_eq!(p.column_names(), vec!["m", "latency"]);
            assert_eq!(p.num_rows, 6);
            assert!(!p.has("op"));
            let msg = data_msg(p.str("op").unwrap_err());
            assert_eq!(msg, "parquet column \"op\" missing (have: [\"m\", \"latency\"])");
            let _ = std::fs::remove_file(&path);
        }
    }

    #[test]
    fn null_in_numeric_column_names_row() {
        let path = temp_file("null");
        synthetic(&path, Compression::SNAPPY, true);
        let msg = data_msg(RawTable::read(&path).unwrap_err());
        assert!(msg.contains("\"latency\"") && msg.contains("row 5"), "{msg}");
        // projection without the bad column still works
        let t = RawTable::read_columns(&path, &["m"]).unwrap();
        assert_eq!(t.num_rows, 6);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn file_problems() {
        let missing = temp_file("missing");
        let err = RawTable::read(&missing).unwrap_err();
        assert_eq!(err.class(), crate::error::ErrorClass::PerfDataNotAvailable);
        assert_eq!(data_msg(err), "file not found");

        let empty = temp_file("empty");
        std::fs::write(&empty, b"").unwrap();
        assert_eq!(data_msg(RawTable::read(&empty).unwrap_err()), "empty file (0 bytes)");

        let lfs = temp_file("lfs");
        std::fs::write(
            &lfs,
            "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12345\n",
        )
        .unwrap();
        let err = RawTable::read(&lfs).unwrap_err();
        assert!(err.is_perf_data_missing());
        let msg = data_msg(err);
        assert!(msg.starts_with("unresolved Git LFS pointer"), "{msg}");
        assert!(msg.contains("git lfs pull"), "{msg}");

        let garbage = temp_file("garbage");
        std::fs::write(&garbage, b"hello, this is not parquet at all").unwrap();
        let msg = data_msg(RawTable::read(&garbage).unwrap_err());
        assert!(msg.contains("PAR1"), "{msg}");

        let corrupt = temp_file("corrupt");
        std::fs::write(&corrupt, b"PAR1 this is truncated garbage PAR1").unwrap();
        let msg = data_msg(RawTable::read(&corrupt).unwrap_err());
        assert!(msg.starts_with("corrupt parquet footer: the footer claims "), "{msg}");

        let tiny = temp_file("tiny");
        std::fs::write(&tiny, b"PA").unwrap();
        assert!(RawTable::read(&tiny).is_err());

        let display = RawTable::read(&empty).unwrap_err().to_string();
        assert!(display.starts_with("perf database error: empty file (0 bytes) ("), "{display}");
        for p in [empty, lfs, garbage, corrupt, tiny] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn missing_column_error() {
        let path = temp_file("cols");
        synthetic(&path, Compression::SNAPPY, false);
        let t = RawTable::read(&path).unwrap();
        let err = t.int("num_heads").unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(
                "perf database error: parquet column \"num_heads\" missing (have: \
                 [\"kernel_source\", \"op\", \"m\", \"k\", \"latency\", \"power\"]) ("
            ),
            "{text}"
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn reads_shipped_tables() {
        // string and large_string schemas (spec 10 §2)
        let gemm = data_root().join("h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet");
        let t = RawTable::read(&gemm).unwrap();
        assert_eq!(t.num_rows, 107_225);
        assert_eq!(t.int("m").unwrap().len(), 107_225);
        assert_eq!(t.str("gemm_dtype").unwrap().len(), 107_225);
        let moe = data_root().join("h200_sxm/moe/vllm/0.24.0/moe_perf.parquet");
        let t = RawTable::read_columns(&moe, &["moe_dtype", "num_tokens", "latency"]).unwrap();
        assert_eq!(t.num_rows, 49_896);
        assert_eq!(t.str("moe_dtype").unwrap().len(), 49_896);
        let ar = data_root().join("h200_sxm/comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet");
        assert_eq!(RawTable::read(&ar).unwrap().num_rows, 69);
        let b200 = data_root().join("b200_sxm/attention/vllm/0.22.0/context_attention_perf.parquet");
        let t = RawTable::read(&b200).unwrap();
        assert_eq!(t.num_rows, 36_992);
        assert!(t.has("power"));
        let nccl = data_root().join("h200_sxm/comm/nccl/2.26.2/nccl_perf.parquet");
        let t = RawTable::read(&nccl).unwrap();
        assert_eq!(t.num_rows, 1008);
        assert!(t.int("message_size").unwrap().contains(&536_870_912));
    }

    /// Every shipped table's string columns expand to far less text than the bound allows,
    /// and a table whose dictionary value is repeated past it is refused.
    #[test]
    fn string_expansion_is_bounded() {
        let mut stack = vec![data_root()];
        let (mut files, mut largest) = (0, 0u64);
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "parquet") {
                    // (A few tables hold a boolean column, which only its own loader reads.)
                    if let Ok(t) = RawTable::read(&path) {
                        largest = largest.max(t.columns.iter().map(|(_, c)| c.expanded_bytes()).sum());
                        files += 1;
                    }
                }
            }
        }
        assert!(files > 100);
        eprintln!("{files} tables; largest expanded string columns: {largest} bytes");
        assert!(largest * 8 < parquet_guard::MAX_EXPANDED_STRING_BYTES, "{largest}");

        let long = "x".repeat(1 << 20);
        let coded = Stored::Coded { codes: vec![0; 600], dict: vec![long], full: OnceLock::new() };
        assert!(coded.expanded_bytes() > parquet_guard::MAX_EXPANDED_STRING_BYTES);
    }

    /// CPU time of this thread in ms (Linux), else wall-clock; the machine may be shared.
    fn cpu_ms() -> f64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            .map(|ns| ns / 1e6)
            .unwrap_or_else(|| {
                static START: OnceLock<std::time::Instant> = OnceLock::new();
                START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
            })
    }

    /// Timing check (run with `--release --ignored`): whole-table reads must take milliseconds.
    /// `AIC_READ_SPEED_FILES=a.parquet:b.parquet` (paths under `data/systems/data`) times more
    /// tables.
    #[test]
    #[ignore]
    fn read_speed() {
        let gemm = data_root().join("b200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet");
        let moe = data_root().join("b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet");
        let extra: Vec<PathBuf> = std::env::var("AIC_READ_SPEED_FILES")
            .map(|v| v.split(':').map(|f| data_root().join(f)).collect())
            .unwrap_or_default();
        for p in [gemm, moe].into_iter().chain(extra) {
            let n = 20;
            let t0 = cpu_ms();
            let mut rows = 0;
            for _ in 0..n {
                rows = RawTable::read(&p).unwrap().num_rows;
            }
            let ms = (cpu_ms() - t0) / n as f64;
            eprintln!("{}: {rows} rows, {ms:.2} ms CPU per whole-table read", p.display());
            let t0 = cpu_ms();
            for _ in 0..n {
                let t = RawTable::read_columns(&p, &["gemm_dtype", "moe_dtype", "m", "n", "k"])
                    .unwrap();
                assert_eq!(t.num_rows, rows);
            }
            let ms = (cpu_ms() - t0) / n as f64;
            eprintln!("  key projection: {ms:.2} ms CPU");
            if std::env::var("AIC_TIMING_DETAIL").is_ok() {
                let t = RawTable::read(&p).unwrap();
                let names = t.column_names();
                for k in 1..=names.len() {
                    let t0 = cpu_ms();
                    for _ in 0..n {
                        RawTable::read_columns(&p, &names[..k]).unwrap();
                    }
                    let ms = (cpu_ms() - t0) / n as f64;
                    eprintln!("  first {k} (+{}): {ms:.2} ms CPU", names[k - 1]);
                }
            }
        }
    }
}
