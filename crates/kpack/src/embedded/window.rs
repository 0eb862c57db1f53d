//! A candidate's bytes read from its file ([`FileWindow`]), for
//! [`super::code_object_in_file`].

use super::CANDIDATE_COPIES;

/// The bytes of `map` (at `at` of the file) read from the file with positioned
/// reads kept in `cache`, [`CANDIDATE_COPIES`] bytes in all (counted in `copied`);
/// past that, a read is the map's bytes, and what of `map` was read so is noted in
/// `mapped` (from, to) for its release. Reads past the end of `map` fail, as a
/// slice's do.
#[derive(Clone, Copy)]
pub(super) struct FileWindow<'a> {
    pub(super) cache: &'a object::ReadCache<&'a std::fs::File>,
    pub(super) map: &'a [u8],
    pub(super) at: u64,
    pub(super) copied: &'a std::cell::Cell<u64>,
    pub(super) mapped: &'a std::cell::Cell<Option<(u64, u64)>>,
}

impl<'a> object::ReadRef<'a> for FileWindow<'a> {
    fn len(self) -> Result<u64, ()> {
        Ok(self.map.len() as u64)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if offset
            .checked_add(size)
            .is_none_or(|end| end > self.map.len() as u64)
        {
            return Err(());
        }
        if self.past_bound(offset..offset + size, size) {
            return self.map.read_bytes_at(offset, size);
        }
        self.cache.read_bytes_at(self.at + offset, size)
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        if range.start > range.end || range.end > self.map.len() as u64 {
            return Err(());
        }
        // The cache reads up to 4 KiB of a string.
        let copies = (range.end - range.start).min(4096);
        if self.past_bound(range.clone(), copies) {
            return self.map.read_bytes_at_until(range, delimiter);
        }
        self.cache
            .read_bytes_at_until(self.at + range.start..self.at + range.end, delimiter)
    }
}

impl FileWindow<'_> {
    /// Whether a read of `range` that copies `copies` bytes passes
    /// [`CANDIDATE_COPIES`]: then it is the map's, and the range is noted for its
    /// release; else the copies are counted.
    fn past_bound(self, range: std::ops::Range<u64>, copies: u64) -> bool {
        let copied = self.copied.get().saturating_add(copies);
        if copied > CANDIDATE_COPIES {
            let was = self.mapped.get().unwrap_or((range.start, range.start));
            self.mapped
                .set(Some((was.0.min(range.start), was.1.max(range.end))));
            return true;
        }
        self.copied.set(copied);
        false
    }
}
