//! Orders that read naturally: numbers inside names compare as numbers
//! (`libk_4` < `libk_14`, `#2` < `#10`), and target IDs by processor number
//! (`gfx900` < `gfx90a` < `gfx1010` < `gfx1250`, see
//! [`crate::bundle::target::target_order`]).

use std::cmp::Ordering;

/// Compare with digit runs as numbers (leading zeros ignored, then shorter first);
/// everything else byte-wise. Equal-looking names fall back to the plain order.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (x, y) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < x.len() && j < y.len() {
        if x[i].is_ascii_digit() && y[j].is_ascii_digit() {
            let si = i;
            while i < x.len() && x[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < y.len() && y[j].is_ascii_digit() {
                j += 1;
            }
            let (da, db) = (trim_zeros(&x[si..i]), trim_zeros(&y[sj..j]));
            let o = da.len().cmp(&db.len()).then_with(|| da.cmp(db));
            if o != Ordering::Equal {
                return o;
            }
        } else {
            let o = x[i].cmp(&y[j]);
            if o != Ordering::Equal {
                return o;
            }
            i += 1;
            j += 1;
        }
    }
    (x.len() - i).cmp(&(y.len() - j)).then_with(|| a.cmp(b))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let k = d.iter().take_while(|&&c| c == b'0').count();
    &d[k.min(d.len().saturating_sub(1))..]
}

/// Target IDs by processor number, then features.
pub fn target_cmp(a: &str, b: &str) -> Ordering {
    crate::bundle::target::target_order(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_as_numbers() {
        let mut v = vec!["libk_14", "libk_4", "#10", "#2", "a", "libk_04x", "libk_4"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            v,
            ["#2", "#10", "a", "libk_4", "libk_4", "libk_04x", "libk_14"]
        );
        let mut t = vec![
            "gfx1250",
            "gfx90a",
            "gfx1010",
            "gfx900",
            "gfx90a:xnack+",
            "gfx942",
        ];
        t.sort_by(|a, b| target_cmp(a, b));
        assert_eq!(
            t,
            [
                "gfx900",
                "gfx90a",
                "gfx90a:xnack+",
                "gfx942",
                "gfx1010",
                "gfx1250"
            ]
        );
        assert_eq!(natural_cmp("x2", "x02"), Ordering::Greater); // plain order breaks the tie
    }
}
