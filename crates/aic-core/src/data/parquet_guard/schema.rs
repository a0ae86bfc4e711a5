//! The schema of a parquet footer, read by aic instead of by the parquet reader.
//!
//! The reader builds its schema tree from child counts it has not checked (a count of 790
//! million children became a 6 GB allocation under the fuzzer), and the bytes it reads them
//! from can be arranged so that a separate pre-check sees other numbers. So aic reads the
//! schema itself, accepts only what a perf table is — a flat list of boolean, integer,
//! floating-point and string columns — and hands the result to the reader, which then skips
//! the footer's schema instead of parsing it.

use std::sync::Arc;

use parquet::basic::{ConvertedType, LogicalType, Repetition, Type as PhysicalType};
use parquet::schema::types::{SchemaDescriptor, Type};

use super::thrift::{Claim, Compact, T_BINARY, T_BOOL_FALSE, T_BOOL_TRUE, T_BYTE, T_I32, T_LIST, T_STRUCT};

/// Most columns a perf table may have (the widest shipped table has 29): every column gets
/// its own reader and buffers.
pub(crate) const MAX_COLUMNS: usize = 256;

/// One schema element as the footer writes it (only the fields aic uses).
#[derive(Debug, Default)]
struct Element {
    physical: Option<i32>,
    repetition: Option<i32>,
    name: Option<String>,
    children: Option<i32>,
    converted: Option<i32>,
    logical: Option<LogicalType>,
    field_id: Option<i32>,
}

/// The footer's Thrift bytes, or why the file has no readable footer.
pub(crate) fn footer_metadata(bytes: &[u8]) -> Claim<&[u8]> {
    let n = bytes.len();
    if n < 12 {
        return Err(format!("{n} bytes are too few to hold a parquet footer"));
    }
    if &bytes[n - 4..] != b"PAR1" {
        return Err("the file does not end with the PAR1 magic".to_string());
    }
    let len = u32::from_le_bytes([bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]]) as usize;
    let start = (n - 8)
        .checked_sub(len)
        .ok_or_else(|| format!("the footer claims {len} bytes of a {n}-byte file"))?;
    Ok(&bytes[start..n - 8])
}

/// Reads the schema of a parquet file's footer: a root group whose children are all columns
/// (no nested groups), each with a physical type aic reads and a repetition of required or
/// optional. The error says what the file claims instead.
pub(crate) fn flat_schema(bytes: &[u8]) -> Claim<SchemaDescriptor> {
    let meta = footer_metadata(bytes)?;
    let mut elements = None;
    Compact::new(meta).walk_struct(&mut |c, id, ty| {
        if id != 2 || elements.is_some() {
            return Ok(false);
        }
        if ty != T_LIST {
            return Err(format!("the footer's schema has Thrift type {ty}, not a list"));
        }
        elements = Some(read_elements(c)?);
        Ok(true)
    })?;
    let elements = elements.ok_or_else(|| "the footer has no schema".to_string())?;
    build(elements)
}

fn read_elements(c: &mut Compact<'_>) -> Claim<Vec<Element>> {
    let header = c.byte()?;
    let ty = header & 0x0f;
    let mut n = u64::from(header >> 4);
    if n == 15 {
        n = c.varint()?;
    }
    if header != 0 && ty != T_STRUCT {
        return Err(format!("the footer's schema lists Thrift type {ty}, not structs"));
    }
    // A root plus at most MAX_COLUMNS columns; each element takes bytes, so the bound also
    // keeps the vector below within the footer's size.
    if n > MAX_COLUMNS as u64 + 1 {
        return Err(format!("the schema claims {n} elements; a perf table has at most {MAX_COLUMNS} columns"));
    }
    (0..n).map(|_| read_element(c)).collect()
}

fn expect(what: &str, declared: u8, expected: u8) -> Claim<()> {
    if declared == expected {
        Ok(())
    } else {
        Err(format!("schema field {what} has Thrift type {declared}, not {expected}"))
    }
}

fn read_element(c: &mut Compact<'_>) -> Claim<Element> {
    let mut e = Element::default();
    c.walk_struct(&mut |c, id, ty| {
        match id {
            1 => {
                expect("type", ty, T_I32)?;
                e.physical = Some(c.i32()?);
            }
            3 => {
                expect("repetition_type", ty, T_I32)?;
                e.repetition = Some(c.i32()?);
            }
            4 => {
                expect("name", ty, T_BINARY)?;
                let raw = c.binary()?;
                let name = std::str::from_utf8(raw).map_err(|_| "a column name is not UTF-8".to_string())?;
                e.name = Some(name.to_string());
            }
            5 => {
                expect("num_children", ty, T_I32)?;
                e.children = Some(c.i32()?);
            }
            6 => {
                expect("converted_type", ty, T_I32)?;
                e.converted = Some(c.i32()?);
            }
            9 => {
                expect("field_id", ty, T_I32)?;
                e.field_id = Some(c.i32()?);
            }
            10 => {
                expect("logical_type", ty, T_STRUCT)?;
                e.logical = Some(read_logical_type(c)?);
            }
            _ => return Ok(false), // type_length, scale, precision and unknown fields
        }
        Ok(true)
    })?;
    Ok(e)
}

/// The logical-type union: strings and integers are what a perf table holds.
fn read_logical_type(c: &mut Compact<'_>) -> Claim<LogicalType> {
    let mut found: Option<LogicalType> = None;
    c.walk_struct(&mut |c, id, ty| {
        if found.is_some() {
            return Err("a logical type sets more than one kind".to_string());
        }
        expect("logical_type member", ty, T_STRUCT)?;
        found = Some(match id {
            1 => {
                c.skip(T_STRUCT)?;
                LogicalType::String
            }
            10 => {
                let (mut bit_width, mut is_signed) = (None, None);
                c.walk_struct(&mut |c, id, ty| {
                    match id {
                        1 => {
                            expect("bitWidth", ty, T_BYTE)?;
                            bit_width = Some(c.byte()? as i8);
                        }
                        2 => is_signed = Some(bool_field(ty)?),
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                match (bit_width, is_signed) {
                    (Some(bit_width), Some(is_signed)) => LogicalType::integer(bit_width, is_signed),
                    _ => return Err("an integer logical type lacks its width or sign".to_string()),
                }
            }
            other => {
                return Err(format!(
                    "logical type {other} is not one aic reads (strings and integers only)"
                ))
            }
        });
        Ok(true)
    })?;
    found.ok_or_else(|| "an empty logical type".to_string())
}

fn bool_field(ty: u8) -> Claim<bool> {
    match ty {
        T_BOOL_TRUE => Ok(true),
        T_BOOL_FALSE => Ok(false),
        other => Err(format!("a boolean field has Thrift type {other}")),
    }
}

fn physical_type(code: i32) -> Option<PhysicalType> {
    Some(match code {
        0 => PhysicalType::BOOLEAN,
        1 => PhysicalType::INT32,
        2 => PhysicalType::INT64,
        4 => PhysicalType::FLOAT,
        5 => PhysicalType::DOUBLE,
        6 => PhysicalType::BYTE_ARRAY,
        _ => return None,
    })
}

fn converted_type(code: i32) -> Option<ConvertedType> {
    Some(match code {
        0 => ConvertedType::UTF8,
        11 => ConvertedType::UINT_8,
        12 => ConvertedType::UINT_16,
        13 => ConvertedType::UINT_32,
        14 => ConvertedType::UINT_64,
        15 => ConvertedType::INT_8,
        16 => ConvertedType::INT_16,
        17 => ConvertedType::INT_32,
        18 => ConvertedType::INT_64,
        _ => return None,
    })
}

fn build(elements: Vec<Element>) -> Claim<SchemaDescriptor> {
    let mut it = elements.into_iter();
    let root = it.next().ok_or_else(|| "the schema is empty".to_string())?;
    let columns: Vec<Element> = it.collect();
    let claimed = root.children.unwrap_or(0);
    if columns.is_empty() || claimed as i64 != columns.len() as i64 {
        return Err(format!(
            "the schema's root claims {claimed} columns where {} elements follow (a perf table is \
             one flat list of columns)",
            columns.len()
        ));
    }
    let mut fields = Vec::with_capacity(columns.len());
    for (i, e) in columns.into_iter().enumerate() {
        let name = e.name.ok_or_else(|| format!("schema column {i} has no name"))?;
        if e.children.unwrap_or(0) != 0 {
            return Err(format!(
                "column \"{name}\" is a nested group; aic reads flat tables of booleans, integers, \
                 floats and strings"
            ));
        }
        let physical = e
            .physical
            .and_then(physical_type)
            .ok_or_else(|| format!("column \"{name}\" has physical type {:?}, not one aic reads", e.physical))?;
        let repetition = match e.repetition {
            Some(0) => Repetition::REQUIRED,
            Some(1) => Repetition::OPTIONAL,
            other => return Err(format!("column \"{name}\" has repetition {other:?}, not required or optional")),
        };
        let converted = match e.converted {
            None => ConvertedType::NONE,
            Some(code) => converted_type(code)
                .ok_or_else(|| format!("column \"{name}\" has converted type {code}, not one aic reads"))?,
        };
        let column = Type::primitive_type_builder(&name, physical)
            .with_repetition(repetition)
            .with_converted_type(converted)
            .with_logical_type(e.logical)
            .with_id(e.field_id)
            .build()
            .map_err(|err| format!("column \"{name}\": {err}"))?;
        fields.push(Arc::new(column));
    }
    let root_name = root.name.unwrap_or_else(|| "schema".to_string());
    let root = Type::group_type_builder(&root_name)
        .with_fields(fields)
        .with_id(root.field_id)
        .build()
        .map_err(|err| format!("schema root: {err}"))?;
    Ok(SchemaDescriptor::new(Arc::new(root)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding only a footer whose metadata is a schema list of (name, type,
    /// num_children) elements.
    fn footer_with_schema(elements: &[(&str, Option<i32>, Option<i32>)]) -> Vec<u8> {
        fn zigzag(buf: &mut Vec<u8>, n: i32) {
            let mut v = ((n << 1) ^ (n >> 31)) as u32;
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    buf.push(b);
                    break;
                }
                buf.push(b | 0x80);
            }
        }
        let mut meta = vec![0x29]; // field 2 (delta 2), list
        assert!(elements.len() < 15);
        meta.push(((elements.len() as u8) << 4) | T_STRUCT);
        for (name, physical, children) in elements {
            let mut last = 0;
            if let Some(t) = physical {
                meta.push(0x15); // field 1, i32
                zigzag(&mut meta, *t);
                meta.push(0x25); // field 3 (delta 2), i32: optional
                zigzag(&mut meta, 1);
                last = 3;
            }
            meta.push(((4 - last) << 4) | T_BINARY); // field 4, binary
            meta.push(name.len() as u8);
            meta.extend_from_slice(name.as_bytes());
            if let Some(n) = children {
                meta.push(0x15); // field 5 (delta 1), i32
                zigzag(&mut meta, *n);
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
    fn a_flat_schema_is_read() {
        let f = footer_with_schema(&[("schema", None, Some(2)), ("m", Some(2), None), ("latency", Some(5), None)]);
        let schema = flat_schema(&f).unwrap();
        assert_eq!(schema.num_columns(), 2);
        assert_eq!(schema.column(0).name(), "m");
        assert_eq!(schema.column(1).physical_type(), PhysicalType::DOUBLE);
    }

    #[test]
    fn a_child_count_that_does_not_match_the_columns_is_refused() {
        let f = footer_with_schema(&[("schema", None, Some(790_000_000)), ("a", Some(2), None)]);
        assert_eq!(
            flat_schema(&f).unwrap_err(),
            "the schema's root claims 790000000 columns where 1 elements follow (a perf table is one \
             flat list of columns)"
        );
    }

    #[test]
    fn nested_groups_and_foreign_types_are_refused() {
        let f = footer_with_schema(&[("schema", None, Some(2)), ("g", None, Some(1)), ("a", Some(2), None)]);
        assert_eq!(
            flat_schema(&f).unwrap_err(),
            "column \"g\" is a nested group; aic reads flat tables of booleans, integers, floats and strings"
        );
        let f = footer_with_schema(&[("schema", None, Some(1)), ("t", Some(3), None)]);
        assert_eq!(flat_schema(&f).unwrap_err(), "column \"t\" has physical type Some(3), not one aic reads");
    }

    #[test]
    fn a_file_without_a_footer_is_refused() {
        assert_eq!(flat_schema(b"PAR1").unwrap_err(), "4 bytes are too few to hold a parquet footer");
        let mut f = b"PAR1".to_vec();
        f.extend_from_slice(&1000u32.to_le_bytes());
        f.extend_from_slice(b"PAR1");
        assert_eq!(flat_schema(&f).unwrap_err(), "the footer claims 1000 bytes of a 12-byte file");
        f.truncate(11);
        f.push(b'E');
        assert_eq!(flat_schema(&f).unwrap_err(), "the file does not end with the PAR1 magic");
    }
}
