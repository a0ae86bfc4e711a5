//! A cursor over the Thrift compact encoding of parquet metadata that reads bytes exactly as
//! the parquet reader does.
//!
//! The guard checks numbers before the reader trusts them, so it must find the numbers the
//! reader will find: a field header ends a struct when its type nibble is 0 (whatever its
//! delta), field ids are 16-bit, a known field is read as the type the format expects (not the
//! type its header declares), and a list of booleans takes no bytes when skipped. Wherever the
//! reader would accept bytes this cursor cannot follow (integers over ten bytes, collections
//! larger than the bytes left), the cursor refuses them: the guard may be stricter than the
//! reader, never looser.

/// A refusal: what the bytes claim that the guard does not accept.
pub(crate) type Claim<T> = std::result::Result<T, String>;

// Thrift compact-protocol types.
pub(crate) const T_BOOL_TRUE: u8 = 1;
pub(crate) const T_BOOL_FALSE: u8 = 2;
pub(crate) const T_BYTE: u8 = 3;
pub(crate) const T_I16: u8 = 4;
pub(crate) const T_I32: u8 = 5;
pub(crate) const T_I64: u8 = 6;
pub(crate) const T_DOUBLE: u8 = 7;
pub(crate) const T_BINARY: u8 = 8;
pub(crate) const T_LIST: u8 = 9;
pub(crate) const T_SET: u8 = 10;
pub(crate) const T_MAP: u8 = 11;
pub(crate) const T_STRUCT: u8 = 12;
pub(crate) const T_UUID: u8 = 13;

/// Nesting the reader's skip follows before it gives up (its own bound).
const SKIP_DEPTH: u32 = 64;

/// A position in Thrift compact-protocol bytes.
pub(crate) struct Compact<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Compact<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Compact { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn byte(&mut self) -> Claim<u8> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| "metadata ends inside a value".to_string())?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn advance(&mut self, n: usize) -> Claim<()> {
        if n > self.remaining() {
            return Err(format!("a value claims {n} bytes where {} remain", self.remaining()));
        }
        self.pos += n;
        Ok(())
    }

    /// The next `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize) -> Claim<&'a [u8]> {
        let start = self.pos;
        self.advance(n)?;
        Ok(&self.buf[start..self.pos])
    }

    /// An unsigned LEB128 integer of at most ten bytes.
    pub(crate) fn varint(&mut self) -> Claim<u64> {
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

    /// An `i32` value as the reader reads one: a zigzag varint, truncated to 32 bits.
    pub(crate) fn i32(&mut self) -> Claim<i32> {
        Ok(self.zigzag()? as i32)
    }

    /// A binary value (length-prefixed bytes).
    pub(crate) fn binary(&mut self) -> Claim<&'a [u8]> {
        let n = self.varint()?;
        let n = usize::try_from(n).map_err(|_| format!("a string claims {n} bytes"))?;
        self.bytes(n)
    }

    /// The next field header of a struct whose previous field id is `last`: `None` at the
    /// struct's end (a type nibble of 0), else the field id and its declared type.
    pub(crate) fn field(&mut self, last: i16) -> Claim<Option<(i16, u8)>> {
        let b = self.byte()?;
        let ty = b & 0x0f;
        if ty == 0 {
            return Ok(None);
        }
        if ty > T_UUID {
            return Err(format!("unknown Thrift type {ty}"));
        }
        let delta = i16::from(b >> 4);
        let id = if delta == 0 {
            self.zigzag()? as i16
        } else {
            last.checked_add(delta).ok_or_else(|| format!("field id {last} + {delta} overflows"))?
        };
        Ok(Some((id, ty)))
    }

    /// A list or set header: (element count, element type).
    fn list(&mut self) -> Claim<(u32, u8)> {
        let b = self.byte()?;
        if b == 0 {
            return Ok((0, T_BYTE)); // an empty list some writers emit with type 0
        }
        let ty = b & 0x0f;
        if !(T_BOOL_TRUE..=T_UUID).contains(&ty) {
            return Err(format!("unknown Thrift list element type {ty}"));
        }
        let mut n = u64::from(b >> 4);
        if n == 15 {
            n = self.varint()?;
        }
        let n = i32::try_from(n).map_err(|_| format!("a list claims {n} elements"))?;
        Ok((n as u32, ty))
    }

    /// Skips a value of declared type `ty`, as the reader's skip does.
    pub(crate) fn skip(&mut self, ty: u8) -> Claim<()> {
        self.skip_within(ty, SKIP_DEPTH)
    }

    fn skip_within(&mut self, ty: u8, depth: u32) -> Claim<()> {
        if depth == 0 {
            return Err(format!("metadata nests deeper than {SKIP_DEPTH} levels"));
        }
        match ty {
            T_BOOL_TRUE | T_BOOL_FALSE => Ok(()),
            T_BYTE => self.advance(1),
            T_I16 | T_I32 | T_I64 => self.varint().map(|_| ()),
            T_DOUBLE => self.advance(8),
            T_BINARY => self.binary().map(|_| ()),
            T_UUID => self.advance(16),
            T_STRUCT => {
                while let Some((_, field_ty)) = self.field(0)? {
                    self.skip_within(field_ty, depth - 1)?;
                }
                Ok(())
            }
            T_LIST | T_SET => {
                let (n, elem) = self.list()?;
                self.skip_elements(u64::from(n), &[elem], depth)
            }
            T_MAP => {
                let n = self.varint()?;
                let n = i32::try_from(n).map_err(|_| format!("a map claims {n} entries"))?;
                if n <= 0 {
                    return Ok(());
                }
                let kv = self.byte()?;
                let (k, v) = (kv >> 4, kv & 0x0f);
                for t in [k, v] {
                    if !(T_BOOL_TRUE..=T_UUID).contains(&t) {
                        return Err(format!("unknown Thrift map element type {t}"));
                    }
                }
                self.skip_elements(n as u64, &[k, v], depth)
            }
            other => Err(format!("unknown Thrift type {other}")),
        }
    }

    /// Skips `n` collection entries of the given element types. A boolean element takes no
    /// bytes in the reader's skip, so entries of booleans only are skipped without a loop;
    /// otherwise every entry takes at least a byte, which bounds `n` by the bytes left.
    fn skip_elements(&mut self, n: u64, types: &[u8], depth: u32) -> Claim<()> {
        let is_bool = |t: &u8| matches!(*t, T_BOOL_TRUE | T_BOOL_FALSE);
        if n == 0 || types.iter().all(is_bool) {
            return Ok(());
        }
        if n > self.remaining() as u64 {
            return Err(format!("a collection claims {n} elements in {} bytes", self.remaining()));
        }
        for _ in 0..n {
            for &t in types {
                self.skip_within(t, depth - 1)?;
            }
        }
        Ok(())
    }

    /// Walks a struct the way the reader decodes one: `on_field` is given each field's id and
    /// declared type and reads the field's value when the id is one it knows (returning
    /// `true`); every other field is skipped by its declared type.
    pub(crate) fn walk_struct(&mut self, on_field: &mut dyn FnMut(&mut Self, i16, u8) -> Claim<bool>) -> Claim<()> {
        let mut last = 0i16;
        while let Some((id, ty)) = self.field(last)? {
            if !on_field(self, id, ty)? {
                self.skip(ty)?;
            }
            last = id;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_nibble_of_zero_ends_a_struct_whatever_its_delta() {
        let mut c = Compact::new(&[0x10]);
        assert_eq!(c.field(0), Ok(None));
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn full_field_ids_are_sixteen_bits() {
        // type i32 with a full id: zigzag(65538 + 2) would be 2 after truncation to 16 bits.
        let mut c = Compact::new(&[0x05, 0x84, 0x80, 0x08]);
        let (id, ty) = c.field(0).unwrap().unwrap();
        assert_eq!((id, ty), (2, T_I32));
        let mut c = Compact::new(&[0xf5]);
        assert!(c.field(i16::MAX - 3).unwrap_err().contains("overflows"));
    }

    #[test]
    fn known_fields_are_read_as_their_expected_type() {
        // Field 2 declared as a boolean, yet read as an i32 (the reader ignores the declared type).
        let bytes = [0x21, 0xc8, 0x01, 0x00];
        let mut value = None;
        Compact::new(&bytes)
            .walk_struct(&mut |c, id, _| {
                if id == 2 {
                    value = Some(c.i32()?);
                    return Ok(true);
                }
                Ok(false)
            })
            .unwrap();
        assert_eq!(value, Some(100));
    }

    #[test]
    fn lists_of_booleans_take_no_bytes_when_skipped() {
        // A list of 5 booleans, then the struct's end.
        let mut c = Compact::new(&[0x51, 0x00]);
        c.skip(T_LIST).unwrap();
        assert_eq!(c.remaining(), 1);
    }

    #[test]
    fn refusals_name_the_problem() {
        let mut c = Compact::new(&[0xf9, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(c.skip(T_LIST).unwrap_err(), "a collection claims 33554431 elements in 0 bytes");
        let mut c = Compact::new(&[0xff; 12]);
        assert_eq!(c.varint().unwrap_err(), "an integer runs over ten bytes");
        let mut c = Compact::new(&[0x0e]);
        assert_eq!(c.field(0).unwrap_err(), "unknown Thrift type 14");
    }
}
